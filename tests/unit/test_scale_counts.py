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

import copy
import io
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from fleet.analysis.facts import declared_facts
from fleet.api import cross_host_diff, drift
from fleet.checks import HostDocuments, evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.models import Run
from fleet.render.html.page import Report, render_html
from fleet.render.terminal.run import render_run
from fleet.store import read_run_file, save_run
from tests.conftest import ROOT

REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run"
HOSTS = 48
AT_MOST = 1.2  # what twice the hosts, with the same distinct answers, may cost


def templates() -> list[dict[str, Any]]:
    loopback = json.loads((REAL_RUN / "loopback8_two_odd.json").read_text())
    h200 = json.loads((REAL_RUN / "h200x2_run.json").read_text())
    return [h200["hosts"]["local"], *loopback["hosts"].values()]


def fleet_run(count: int, folder: Path, seed: int = 1) -> Run:
    """`count` hosts, each a captured one with its own identity and timings, saved and read."""
    rng = random.Random(seed)
    sources = templates()
    hosts = {}
    for index in range(count):
        name = f"gpu-{index:05d}"
        host = copy.deepcopy(sources[index % len(sources)])
        host["address"] = f"10.0.{index // 256}.{index % 256}"
        host["elapsed_s"] = round(rng.uniform(5, 15), 3)
        for probe, result in host["probes"].items():
            result["elapsed_s"] = round(rng.uniform(0.1, 2), 3)
            if probe == "system":
                result["data"]["hostname"] = name
            if probe == "gpu":
                for gpu in result["data"].get("gpus") or []:
                    gpu["uuid"] = f"GPU-{index:06d}-{gpu['index']}"
                    gpu["serial"] = f"{1650000000000 + index * 16 + gpu['index']}"
            if probe == "allreduce":
                result["data"]["elapsed_s"] = round(rng.uniform(9, 11), 3)
        hosts[name] = host
    document = {
        "schema": "fleet.run/2",
        "fleet_version": "test",
        "started": f"2026-12-01T10:00:0{seed}.000Z",
        "finished": "",
        "bundle_sha256": "0" * 64,
        "inventory": "scale.yaml",
        "probes": sorted({p for h in hosts.values() for p in h["probes"]}),
        "interrupted": False,
        "hosts": hosts,
    }
    return read_run_file(save_run(Run.from_dict(document), folder))


@contextmanager
def calls() -> Iterator[Counter[str]]:
    """Every Python function called meanwhile, counted by name."""
    counted: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            counted[frame.f_code.co_name] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield counted
    finally:
        sys.setprofile(previous)


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
        report = evaluate(rules, run, {}, documents)
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
