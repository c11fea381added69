"""diff, drift, show, check and report cost per distinct answer, not per host (issue 25),
asserted by counting operations, not by timing.

The fleet is the captured hosts of the golden runs (the real 2× H200 host, the 8-host loopback
run with two odd hosts) repeated under unique identities: own name, address, hostname, GPU UUIDs
and serials, and jittered timings (fields the comparison leaves out), saved and read back as a
saved run is. N and 2N such hosts give the same distinct answers, so the costly steps (flattening
a payload, building a host document for the rules, a JMESPath search, describing a key fact)
must be as many at 2N as at N: at most 1.2 times.
"""

from __future__ import annotations

import io
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from fleet.analysis.baselines.build import place_hosts
from fleet.analysis.facts import declared_facts
from fleet.api import cross_host_diff, drift
from fleet.checks import HostDocuments, evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.models import Run
from fleet.render.html.page import Report, render_html
from fleet.render.terminal.run import render_run
from fleet.store import read_run_file, write_run_json
from tests.unit import helpers
from tests.unit.helpers import calls, fleet_run

HOSTS = 48
AT_MOST = 1.2  # what twice the hosts, with the same distinct answers, may cost


def counted(
    work: Callable[[Run, Run], object], tmp_path: Path
) -> tuple[Counter[str], Counter[str]]:
    found = []
    for count in (HOSTS, 2 * HOSTS):
        old = fleet_run(count, tmp_path / f"old{count}", seed=1)
        new = fleet_run(count, tmp_path / f"new{count}", seed=2)
        with calls() as made:
            work(old, new)
        found.append(made)
    return found[0], found[1]


def assert_per_answer(small: Counter[str], large: Counter[str], name: str) -> None:
    assert small[name] > 0, f"nothing called {name}: the fleet no longer exercises it"
    assert large[name] <= AT_MOST * small[name], (name, small[name], large[name])


def test_the_diff_flattens_each_distinct_answer_once(tmp_path: Path) -> None:
    small, large = counted(lambda old, new: cross_host_diff(new), tmp_path)
    assert_per_answer(small, large, "_walk")  # a payload flattened field by field


def test_drift_flattens_each_distinct_answer_once(tmp_path: Path) -> None:
    small, large = counted(lambda old, new: drift(old, new), tmp_path)
    assert_per_answer(small, large, "_walk")


def test_line_rates_place_each_kind_of_host_once(tmp_path: Path) -> None:
    """The hosts' cohorts for the line rates (`fleet check`): a cohort key and a placing per
    distinct GPU set, not per host."""
    small, large = counted(lambda old, new: place_hosts(new, declared_facts()), tmp_path)
    assert_per_answer(small, large, "default_key")
    assert_per_answer(small, large, "_placed_alike")


def test_drift_compares_each_pair_of_payloads_once(tmp_path: Path) -> None:
    """A probe's payloads on one host in the two runs are compared once per distinct pair (the
    hosts' shared payloads: one object each), not once per host."""
    old = fleet_run(2 * HOSTS, tmp_path / "old", seed=1)
    new = fleet_run(2 * HOSTS, tmp_path / "new", seed=2)
    pairs = {
        (probe, id(result.data), id(old.hosts[name].probes[probe].data))
        for name, outcome in new.hosts.items()
        if name in old.hosts
        for probe, result in outcome.probes.items()
        if probe in old.hosts[name].probes
    }
    with calls() as made:
        drift(old, new)
    assert 0 < made["_probe_changes"] <= len(pairs)
    assert len(pairs) < sum(len(outcome.probes) for outcome in new.hosts.values()) / 2


def test_show_describes_each_distinct_answer_once(tmp_path: Path) -> None:
    def show(old: Run, new: Run) -> None:
        render_run(Console(file=io.StringIO(), width=120), new, cross_host_diff(new))

    small, large = counted(show, tmp_path)
    assert_per_answer(small, large, "_walk")
    assert_per_answer(small, large, "_describe")  # a key fact's text


def test_check_judges_each_distinct_answer_once(tmp_path: Path) -> None:
    rules = load_rules(pack_path("inference"), available_probes())
    made = []
    for count in (HOSTS, 2 * HOSTS):
        run = fleet_run(count, tmp_path / str(count))
        documents = HostDocuments(run.hosts, {}, declared_facts())
        report = evaluate(rules, run, {}, documents=documents)
        assert len(report.results[0].verdicts) == count
        made.append((documents.searches, documents.built, documents.classes.flattened))
    (searches, built, flattened), (searches2, built2, flattened2) = made
    assert 0 < searches2 <= AT_MOST * searches  # JMESPath searches
    assert 0 < built2 <= AT_MOST * built  # host documents built
    assert 0 < flattened2 <= AT_MOST * flattened  # payloads flattened to class them


def test_the_report_renders_each_distinct_answer_once(tmp_path: Path) -> None:
    def report(old: Run, new: Run) -> None:
        render_html(Report(new, cross_host_diff(new), exit_code=0))

    small, large = counted(report, tmp_path)
    assert_per_answer(small, large, "_walk")
    assert_per_answer(small, large, "divergence_row")


# ---------------------------------------------- the same, from a plain --json document (issue 40)


def plain_run(count: int, folder: Path, seed: int = 1) -> Run:
    """fleet_run's hosts written as `fleet probe --json FILE` writes them, and read back."""
    path = folder / "plain.json"
    write_run_json(path, helpers.fleet_run(count, folder, seed))  # not the patched name
    return read_run_file(path)


@pytest.mark.parametrize(
    "counted_test",
    [
        test_the_diff_flattens_each_distinct_answer_once,
        test_drift_flattens_each_distinct_answer_once,
        test_show_describes_each_distinct_answer_once,
        test_check_judges_each_distinct_answer_once,
        test_the_report_renders_each_distinct_answer_once,
    ],
    ids=["diff", "drift", "show", "check", "report"],
)
def test_a_plain_document_is_worked_on_per_distinct_answer(
    counted_test: Callable[[Path], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "fleet_run", plain_run)
    counted_test(tmp_path)


def test_loading_a_plain_document_is_linear_in_hosts(tmp_path: Path) -> None:
    made = []
    for count in (HOSTS, 2 * HOSTS):
        path = tmp_path / f"{count}.json"
        write_run_json(path, fleet_run(count, tmp_path / str(count)))
        with calls() as counts:
            read_run_file(path)
        made.append(counts)
    small, large = made
    for name in ("_fleet_result", "_fleet_host"):  # a probe result, a host (by their layout)
        assert 0 < large[name] <= 2.2 * small[name], (name, small[name], large[name])


def test_the_diff_sorts_each_split_of_the_hosts_once(tmp_path: Path) -> None:
    """Facts that differ split the hosts along the same few lines: each such list of hosts is
    sorted once and is one object in every divergence that has it."""
    from fleet.analysis.across_hosts.diff import FactGroups
    from fleet.analysis.facts import run_declarations

    run = fleet_run(2 * HOSTS, tmp_path / "saved")
    groups = FactGroups(list(run.hosts.values()), run_declarations([run], ()))
    listed = [
        hosts
        for found in groups.value_divergences()
        for hosts in (found.majority_hosts, *(h for _, h in found.others))
    ]
    assert all(list(hosts) == sorted(hosts) for hosts in listed)
    distinct = {id(hosts) for hosts in listed}
    assert len(distinct) == len(groups._sorted) < len(listed) / 4
