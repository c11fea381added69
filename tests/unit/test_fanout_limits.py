"""The fan-out's bounds: handshakes (CPU) and open sessions (idle) are bounded apart, a host's clock
starts with its handshake, and --concurrency caps both.

The transport here is an in-process stand-in (its handshake is a sleep, its host answers with the
runner's real protocol lines), so the bounds can be observed exactly; tests/faults and
tests/integration run the same fan-out over real sshd.
"""

from __future__ import annotations

import asyncio
import json
import resource
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from fleet.execution.bundle import build_bundle
from fleet.execution.fanout import FanOut, RunSettings
from fleet.execution.limits import RESERVED_FDS, plan_limits, raise_open_file_limit
from fleet.execution.protocol import ExecResult
from fleet.models import Host, HostOutcome
from fleet.transport.base import HandshakeSlot, OutputSink

PROBES = ["system"]


@dataclass
class Gauge:
    """Counts what is in flight and remembers the most at once."""

    now: int = 0
    most: int = 0

    def __enter__(self) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def __exit__(self, *exc: object) -> None:
        self.now -= 1


@dataclass
class StandInTransport:
    handshake_s: float = 0.0
    run_s: float = 0.0
    handshakes: Gauge = field(default_factory=Gauge)
    sessions: Gauge = field(default_factory=Gauge)
    all_running: asyncio.Event | None = None  # set once `expect_running` sessions run at once
    expect_running: int = 0

    async def open_session(self, host: Host, handshake: HandshakeSlot) -> StandInSession:
        self.sessions.__enter__()
        try:
            async with handshake:
                with self.handshakes:
                    await asyncio.sleep(self.handshake_s)
        except BaseException:
            self.sessions.__exit__()
            raise
        return StandInSession(self)

    async def close(self) -> None:
        return None


@dataclass
class StandInSession:
    transport: StandInTransport

    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        transport = self.transport
        if transport.all_running is not None:
            if transport.sessions.now >= transport.expect_running:
                transport.all_running.set()
            await transport.all_running.wait()
        await asyncio.sleep(transport.run_s)
        for message in answer(PROBES):
            sink(json.dumps(message).encode() + b"\n")
        return ExecResult(exit_status=0)

    async def close(self) -> None:
        self.transport.sessions.__exit__()


def answer(probes: Sequence[str]) -> list[dict[str, object]]:
    """What a healthy host runner writes: hello, one result per probe, done."""
    hello = {"type": "hello", "protocol": 1, "python": "3.11.7", "executable": "python", "pid": 1}
    results = [
        {"type": "probe", "name": n, "status": "ok", "ok": True, "data": {}, "elapsed_s": 0.0}
        for n in probes
    ]
    return [hello, *results, {"type": "done", "elapsed_s": 0.0}]


def hosts(count: int) -> list[Host]:
    return [Host(name=f"h{i:03d}", address=f"10.0.0.{i}") for i in range(count)]


def fan_out(transport: StandInTransport, count: int, **settings: object) -> dict[str, HostOutcome]:
    async def main() -> dict[str, HostOutcome]:
        if transport.expect_running:
            transport.all_running = asyncio.Event()
        runner = FanOut(build_bundle(PROBES), {"ssh": transport}, RunSettings(**settings))  # type: ignore[arg-type]
        return await runner.run(hosts(count))

    return asyncio.run(main())


def statuses(outcomes: dict[str, HostOutcome]) -> set[str]:
    return {o.status for o in outcomes.values()}


# ---------------------------------------------------------------------------------- behaviour


def test_waiting_for_a_handshake_slot_does_not_run_down_a_hosts_deadline() -> None:
    # one handshake at a time, 0.4 s each: the last of 6 hosts waits 2 s, its deadline is 1.5 s
    transport = StandInTransport(handshake_s=0.4)
    outcomes = fan_out(transport, 6, handshakes=1, timeout_s=1.5)
    assert statuses(outcomes) == {"ok"}, outcomes
    assert transport.handshakes.most == 1


def test_the_deadline_covers_the_handshake_itself() -> None:
    outcomes = fan_out(StandInTransport(handshake_s=3.0), 2, timeout_s=0.5)
    assert statuses(outcomes) == {"timeout"}
    assert all(o.elapsed_s < 2.0 for o in outcomes.values())


def test_the_deadline_covers_the_whole_host_run() -> None:
    outcomes = fan_out(StandInTransport(handshake_s=0.2, run_s=3.0), 2, timeout_s=1.0)
    assert statuses(outcomes) == {"timeout"}


def test_by_default_every_host_holds_a_session_at_once() -> None:
    # each host's run waits until all 300 run: only a fan-out that holds them all finishes
    transport = StandInTransport(handshake_s=0.001, expect_running=300)
    outcomes = fan_out(transport, 300, handshakes=8, timeout_s=30)
    assert statuses(outcomes) == {"ok"}
    assert transport.sessions.most == 300
    assert transport.handshakes.most <= 8


def test_concurrency_caps_handshakes_and_sessions() -> None:
    transport = StandInTransport(handshake_s=0.01, run_s=0.05)
    outcomes = fan_out(transport, 40, concurrency=3, handshakes=16, timeout_s=30)
    assert statuses(outcomes) == {"ok"}
    assert transport.sessions.most == 3
    assert transport.handshakes.most <= 3


# ------------------------------------------------------------------------------------ planning


def test_plan_defaults_bound_handshakes_by_cores_and_sessions_by_hosts() -> None:
    limits = plan_limits(hosts(500), handshakes=32, open_files=100_000)
    assert (limits.handshakes, limits.sessions, limits.capped_by_open_files) == (32, 500, False)


def test_plan_says_when_the_open_file_budget_caps_the_run() -> None:
    limits = plan_limits(hosts(1000), handshakes=32, open_files=RESERVED_FDS + 600)
    assert (limits.sessions, limits.capped_by_open_files) == (600, True)
    assert "open-file limit" in limits.describe()
    assert "400 hosts wait" in limits.describe()


def test_plan_concurrency_caps_both() -> None:
    limits = plan_limits(hosts(500), concurrency=10, handshakes=32, open_files=100_000)
    assert (limits.handshakes, limits.sessions, limits.capped_by_open_files) == (10, 10, False)


def test_local_hosts_count_three_descriptors_each() -> None:
    local = [Host(name=f"l{i}", address="localhost", transport="local") for i in range(500)]
    limits = plan_limits(local, handshakes=32, open_files=RESERVED_FDS + 300)
    assert (limits.sessions, limits.capped_by_open_files) == (100, True)


def test_the_soft_open_file_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard < 256:
        pytest.skip(f"hard limit {hard}: nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard // 2, hard))
    try:
        assert raise_open_file_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, hard // 2), hard))
