"""Drift between two runs: what changed per host, and hosts that came or went."""

from __future__ import annotations

import dataclasses

from fleet.analysis.across_runs.drift import compare_runs
from fleet.analysis.facts import declared_facts
from fleet.models import Run
from tests.unit.helpers import allreduce, gpu, host

DECLARED = declared_facts()


def run(*outcomes, started: str = "2026-11-30T01:00:00Z") -> Run:
    return Run("0.1.0", started, started, "ab" * 32, {o.name: o for o in outcomes})


def test_a_probe_only_one_run_ran_is_not_a_change() -> None:
    """`-p` in one run: its probes are named as not compared, never counted as drift."""
    old = run(host("a", torch={"version": "2.9.1"}))
    new = run(host("a", torch={"version": "2.9.1"}, system={"hostname": "a"}))
    drift = compare_runs(old, new, DECLARED)
    assert drift.changes == ()
    assert not drift.found
    assert drift.probes_only_new == ("system",)
    assert any("not run in the old run: system" in note for note in drift.unlike)


def test_version_change_on_some_hosts_is_reported_once_with_the_hosts() -> None:
    old = run(*(host(f"gpu-0{i}", torch={"version": "2.9.1"}) for i in range(1, 5)))
    new = run(
        *(host(f"gpu-0{i}", torch={"version": "2.11.0" if i < 3 else "2.9.1"}) for i in range(1, 5))
    )
    [change] = compare_runs(old, new, DECLARED).changes
    assert (change.fact, change.old, change.new, change.hosts) == (
        "torch.version",
        "2.9.1",
        "2.11.0",
        ("gpu-01", "gpu-02"),
    )


def test_added_and_removed_names_and_hosts() -> None:
    modules = lambda names: {"modules": {"m": {"names": names}}}  # noqa: E731
    old = run(host("a", dir=modules(["x", "y"])), host("gone", dir=modules([])))
    new = run(host("a", dir=modules(["y", "z"])), host("new", dir=modules([])))
    drift = compare_runs(old, new, DECLARED)
    assert drift.added_hosts == ("new",)
    assert drift.removed_hosts == ("gone",)
    assert {(c.kind, c.old, c.new) for c in drift.changes} == {
        ("added", None, "z"),
        ("removed", "x", None),
    }


def test_measurements_drift_only_beyond_tolerance() -> None:
    old = run(host("a", gpu=gpu(), allreduce=allreduce(10.0, 300.0)))
    same = run(host("a", gpu=gpu(), allreduce=allreduce(11.0, 280.0)))
    slower = run(host("a", gpu=gpu(), allreduce=allreduce(30.0, 300.0)))
    assert not compare_runs(old, same, DECLARED).found
    [change] = compare_runs(old, slower, DECLARED).changes
    assert change.kind == "measure"
    assert change.fact == "allreduce eager 8 B latency_us"


def test_host_status_change_is_drift() -> None:
    old = run(host("a", torch={"version": "1"}))
    dead = host("a", status="unreachable")
    drift = compare_runs(old, run(dead), DECLARED)
    assert ("_host.status", "ok", "unreachable") in {(c.fact, c.old, c.new) for c in drift.changes}


def test_hosts_a_limited_run_did_not_select_are_left_out_not_gone() -> None:
    """Issue 24 item 12: a run records its --limit; drift compares the hosts both runs selected."""
    everyone = [host(f"gpu-0{i}", torch={"version": "2.9.1"}) for i in range(1, 5)]
    full = run(*everyone)
    limited = dataclasses.replace(
        run(*everyone[:2], started="2026-11-30T02:00:00Z"), limit="gpu-0[1-2]"
    )
    drift = compare_runs(full, limited, DECLARED)
    assert (drift.removed_hosts, drift.left_out, drift.found) == ((), ("gpu-03", "gpu-04"), False)
    assert "the new run's --limit gpu-0[1-2]: gpu-[03-04]" in drift.left_out_note
    backwards = compare_runs(limited, full, DECLARED)  # the baseline was the limited one
    assert (backwards.added_hosts, backwards.left_out) == ((), ("gpu-03", "gpu-04"))


def test_limit_narrows_the_drift_of_two_runs() -> None:
    old = run(*(host(f"gpu-0{i}", torch={"version": "2.9.1"}) for i in range(1, 5)))
    new = run(
        host("gpu-01", torch={"version": "2.9.1"}), host("gpu-04", torch={"version": "2.11.0"})
    )
    assert compare_runs(old, new, DECLARED).found  # gone hosts and a change
    narrowed = compare_runs(old, new, DECLARED, limit="gpu-01")
    assert (narrowed.found, narrowed.left_out) == (False, ("gpu-02", "gpu-03", "gpu-04"))
    assert narrowed.left_out_why == "--limit gpu-01"


def test_a_run_document_keeps_its_limit() -> None:
    limited = dataclasses.replace(run(host("gpu-01")), limit="gpu-01")
    assert Run.from_dict(limited.to_dict()).limit == "gpu-01"
    assert "limit" not in run(host("gpu-01")).to_dict()
