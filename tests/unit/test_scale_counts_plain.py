"""Issue 40: every command works per distinct answer on a plain `--json` document too, as on a
saved run (tests/unit/test_scale_counts.py), because loading shares its equal payloads: 48 and 96
hosts with the same distinct answers, read from the plain form, cost about the same. Counted, not
timed."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from fleet.analysis.facts import declared_facts
from fleet.api import cross_host_diff, drift
from fleet.checks import HostDocuments, evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.models import Run
from fleet.render.html.page import Report, render_html
from fleet.render.terminal.run import render_run
from fleet.store import read_run_file, write_run_json
from tests.unit.helpers import calls, fleet_run
from tests.unit.test_scale_counts import AT_MOST, HOSTS, assert_per_answer


def plain_run(count: int, folder: Path, seed: int = 1) -> Run:
    """fleet_run's hosts written as `fleet probe --json FILE` writes them, and read back."""
    path = folder / "plain.json"
    write_run_json(path, fleet_run(count, folder, seed))
    return read_run_file(path)


def counted(
    work: Callable[[Run, Run], object], tmp_path: Path
) -> tuple[Counter[str], Counter[str]]:
    found = []
    for count in (HOSTS, 2 * HOSTS):
        old = plain_run(count, tmp_path / f"old{count}", seed=1)
        new = plain_run(count, tmp_path / f"new{count}", seed=2)
        with calls() as made:
            work(old, new)
        found.append(made)
    return found[0], found[1]


def test_loading_a_plain_document_decodes_each_host_once(tmp_path: Path) -> None:
    made = []
    for count in (HOSTS, 2 * HOSTS):
        path = tmp_path / f"{count}.json"
        write_run_json(path, fleet_run(count, tmp_path / str(count)))
        with calls() as counts:
            read_run_file(path)
        made.append(counts)
    small, large = made
    for name in ("_result_member", "_object"):  # a probe result's member, an object
        assert 0 < large[name] <= 2.2 * small[name], (name, small[name], large[name])  # linear


def test_the_diff_of_a_plain_document_flattens_each_distinct_answer_once(tmp_path: Path) -> None:
    small, large = counted(lambda old, new: cross_host_diff(new), tmp_path)
    assert_per_answer(small, large, "_walk")


def test_drift_between_plain_documents_flattens_each_distinct_answer_once(
    tmp_path: Path,
) -> None:
    small, large = counted(lambda old, new: drift(old, new), tmp_path)
    assert_per_answer(small, large, "_walk")


def test_show_of_a_plain_document_describes_each_distinct_answer_once(tmp_path: Path) -> None:
    def show(old: Run, new: Run) -> None:
        render_run(Console(file=io.StringIO(), width=120), new, cross_host_diff(new))

    small, large = counted(show, tmp_path)
    assert_per_answer(small, large, "_walk")
    assert_per_answer(small, large, "_describe")


def test_check_of_a_plain_document_judges_each_distinct_answer_once(tmp_path: Path) -> None:
    rules = load_rules(pack_path("inference"), available_probes())
    made = []
    for count in (HOSTS, 2 * HOSTS):
        run = plain_run(count, tmp_path / str(count))
        documents = HostDocuments(run.hosts, {}, declared_facts())
        report = evaluate(rules, run, {}, documents=documents)
        assert len(report.results[0].verdicts) == count
        made.append((documents.searches, documents.built, documents.classes.flattened))
    (searches, built, flattened), (searches2, built2, flattened2) = made
    assert 0 < searches2 <= AT_MOST * searches
    assert 0 < built2 <= AT_MOST * built
    assert 0 < flattened2 <= AT_MOST * flattened


def test_the_report_of_a_plain_document_renders_each_distinct_answer_once(
    tmp_path: Path,
) -> None:
    def report(old: Run, new: Run) -> None:
        render_html(Report(new, cross_host_diff(new), exit_code=0))

    small, large = counted(report, tmp_path)
    assert_per_answer(small, large, "_walk")
    assert_per_answer(small, large, "divergence_row")
