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
