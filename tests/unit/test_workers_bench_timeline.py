"""What bench/workers_scale.py reads to say where a run's wall went: the rig's hosts spread so
that neighbours in the inventory are served by different processes, fleet's timeline stamps
(FLEET_WORKER_TIMELINE), and the completion curve made of them."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from fleet.execution.timeline import TIMELINE_ENV, HostClock

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from asyncssh_rig import served_by, server_slot
from workers_timeline import completion_curve, load_timeline


@pytest.mark.parametrize(("hosts", "procs"), [(2000, 8), (2000, 10), (150, 1), (7, 3)])
def test_every_run_of_neighbours_meets_every_server_process(hosts: int, procs: int) -> None:
    slots = [server_slot(index, procs) for index in range(hosts)]
    for start in range(0, hosts - procs + 1, procs):
        assert sorted(slots[start : start + procs]) == list(range(procs))
    served = [index for slot in range(procs) for index in served_by(slot, hosts, procs)]
    assert sorted(served) == list(range(hosts))  # each host served once


def test_a_worker_dealt_every_nth_host_meets_every_server_process() -> None:
    procs = workers = 8
    one_worker = [server_slot(index, procs) for index in range(3, 2000, workers)]
    counts = Counter(one_worker)
    assert set(counts) == set(range(procs))
    assert max(counts.values()) - min(counts.values()) <= 1


def test_no_stamps_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMELINE_ENV, raising=False)
    assert HostClock.from_env("fanout") is None


def test_each_process_appends_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "timeline"
    monkeypatch.setenv(TIMELINE_ENV, str(path))
    for role in ("relay", "fanout"):
        clock = HostClock.from_env(role)
        assert clock is not None
        clock.add("handshake", 0.25)
        clock.add("handshake", 0.5)
        clock.host_done()
        clock.mark("forked")
        clock.write(hosts=1)
    first, second = load_timeline(path)
    assert (first["role"], second["role"]) == ("relay", "fanout")
    assert second["waits_s"] == {"handshake": 0.75}
    assert second["hosts"] == 1
    assert len(second["finished"]) == 1
    assert set(second["marks"]) == {"forked"}
    assert json.loads(path.read_text().splitlines()[0])["cpu_s"] > 0


def test_the_completion_curve_reads_the_shares_of_hosts_done() -> None:
    curve = completion_curve([10.0 + i / 10 for i in range(1, 101)], start=10.0)
    assert curve == "10%: 1.00 s  50%: 5.00 s  90%: 9.00 s  100%: 10.00 s"
    assert completion_curve([], 0.0) == "no host finished"


def test_a_timeline_that_cannot_be_written_costs_the_run_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(TIMELINE_ENV, str(tmp_path / "no-such-folder" / "timeline"))
    clock = HostClock.from_env("fanout")
    assert clock is not None
    clock.write(hosts=0)  # no exception
    assert "cannot write the timeline" in caplog.text
