"""The fan-out over worker processes: how many, which hosts each, their share of the bounds, and
the frames their results travel in (the processes themselves: tests/integration/
test_workers_fleet.py and tests/faults/test_worker_processes.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from fleet.execution.bundle import Bundle
from fleet.execution.fanout import RunSettings
from fleet.execution.limits import (
    EARLY_SEED_BYTES,
    RESERVED_FDS,
    early_seed_workers,
    plan_limits,
    usable_cores,
)
from fleet.execution.workers import (
    FrameReader,
    SeedJob,
    SeedProcess,
    WorkerJob,
    deal,
    frame,
    share_settings,
    spread,
    worker_count,
)
from fleet.models import Host, HostOutcome, ProbeResult


def hosts(count: int, transport: str = "ssh") -> list[Host]:
    return [
        Host(f"h{i:04d}", f"10.0.{i // 250}.{i % 250}", transport=transport) for i in range(count)
    ]


@pytest.mark.parametrize(
    ("requested", "count", "concurrency", "expected"),
    [
        (None, 2000, None, 16),  # one per core
        (None, 200, None, 3),  # at least 64 hosts each
        (None, 127, None, 1),  # too few to pay for a second process: none at all
        (None, 1, None, 1),
        (4, 2, None, 2),  # asked for: at most one per host
        (1, 5000, None, 1),
        (8, 2000, 3, 3),  # never more than --concurrency
    ],
)
def test_worker_count(
    requested: int | None, count: int, concurrency: int | None, expected: int
) -> None:
    assert worker_count(requested, count, concurrency, cores=16) == expected


def test_hosts_are_dealt_round_robin_each_once() -> None:
    dealt = deal(hosts(10), 3)
    assert [[h.name for h in share] for share in dealt] == [
        ["h0000", "h0003", "h0006", "h0009"],
        ["h0001", "h0004", "h0007"],
        ["h0002", "h0005", "h0008"],
    ]


def test_only_ssh_hosts_go_to_workers() -> None:
    mixed = [*hosts(2), Host("here", "localhost", transport="local"), *hosts(1, "slurm")]
    remote, here = spread(mixed)
    assert [h.transport for h in remote] == ["ssh", "ssh"]
    assert [h.transport for h in here] == ["local", "slurm"]


def test_workers_share_the_bounds_of_one_controller() -> None:
    settings = RunSettings(concurrency=100, handshakes=64)
    share = share_settings(settings, 4, open_files=4096)
    assert (share.concurrency, share.handshakes, share.open_files) == (25, 16, 1024)
    assert share.timeout_s == settings.timeout_s  # the rest is the controller's own
    # the open-file budget split four ways caps each worker's sessions, as it would cap one
    limits = plan_limits(hosts(4000)[::4], None, share.handshakes, share.open_files)
    assert limits.sessions == 1024 - RESERVED_FDS
    assert limits.capped_by_open_files


def test_a_share_is_never_below_one() -> None:
    share = share_settings(RunSettings(concurrency=3, handshakes=2), 3, open_files=10)
    assert (share.concurrency, share.handshakes) == (1, 1)
    assert share.open_files is not None
    assert share.open_files > RESERVED_FDS


def test_frames_split_anywhere_arrive_whole_and_in_order() -> None:
    outcome = HostOutcome(
        "h1",
        "ok",
        "10.0.0.1",
        probes={"system": ProbeResult("ok", True, {"x": "é" * 5000}, None, 0.1)},
    )
    messages = [("connecting", "h1"), ("finished", outcome), ("done",)]
    stream = b"".join(frame(m) for m in messages)

    async def read(chunk: int) -> list[object]:
        got: list[object] = []
        reader = FrameReader(got.append)
        for start in range(0, len(stream), chunk):
            reader.data_received(stream[start : start + chunk])
        reader.connection_lost(None)
        await reader.ended
        return got

    for chunk in (1, 3, 4096, len(stream)):
        assert asyncio.run(read(chunk)) == messages


def test_the_seed_starts_early_only_where_workers_are_likely(tmp_path: Path) -> None:
    small, big = tmp_path / "small.yaml", tmp_path / "big.yaml"
    small.write_text("hosts: {a: {}}\n")
    big.write_text("# notes\n" * (EARLY_SEED_BYTES // 8) + "hosts: {a: {}}\n")
    assert early_seed_workers(small, None, None) is None
    assert early_seed_workers(tmp_path / "missing.yaml", None, None) is None  # said where read
    assert early_seed_workers(big, "rack1", None) is None  # a --limit may select a few hosts
    assert early_seed_workers(big, None, 1) is None  # --workers 1: no worker at all
    assert early_seed_workers(None, None, None) is None  # this machine
    assert early_seed_workers(big, None, 3) == 3  # room for the workers asked for
    assert early_seed_workers(big, None, None) == usable_cores()


def test_a_seed_not_needed_after_all_is_reaped_and_its_pipes_closed() -> None:
    seed = SeedProcess(2)
    pid, parent_ends = seed.process.pid, [(p.stream_read, p.stop_write) for p in seed.pipes]
    seed.discard()
    assert seed.process.returncode is not None  # reaped: no zombie, nothing running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    for fd in (fd for pair in parent_ends for fd in pair):
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(fd)
    seed.discard()  # twice: nothing more to do


def test_a_seed_whose_parent_ends_before_its_job_exits_on_its_own() -> None:
    seed = SeedProcess(1)
    assert seed.process.stdin is not None
    seed.process.stdin.close()  # what the seed sees of a parent gone before it had a job
    assert seed.process.wait(timeout=30) == 0
    seed.given = True  # it has ended: only its pipes are left to close
    for pipes in seed.pipes:
        pipes.close_parent_ends()


def test_a_job_gets_the_first_pipes_and_names_the_rest_unused() -> None:
    seed = SeedProcess(3)
    try:
        workers = tuple(WorkerJob(i, (), RunSettings(), -1, -1) for i in range(2))
        job = seed.job_for(SeedJob(Bundle("", {}), None, workers))  # type: ignore[arg-type]
        assert [(w.stream_fd, w.stop_fd) for w in job.workers] == [
            p.seed_ends for p in seed.pipes[:2]
        ]
        assert job.unused_fds == seed.pipes[2].seed_ends
    finally:
        seed.discard()
