"""The fan-out's own rules, over an in-memory transport: one outcome per host, whatever each does."""

from __future__ import annotations

import asyncio

from fleet.errors import AuthError
from fleet.execution.bundle import build_bundle
from fleet.execution.fanout import FanOut, RunSettings
from fleet.execution.protocol import ExecResult
from fleet.models import Host, HostOutcome
from fleet.transport.base import OutputSink
from tests.memory_transport import MemoryTransport, Script, runner_lines

SYSTEM = {"system": {"hostname": "h"}}


def hosts(*names: str) -> list[Host]:
    return [Host(name=n, address=n, transport="memory") for n in names]


def fan_out(transport: MemoryTransport, **settings: float) -> FanOut:
    return FanOut(build_bundle(["system"]), {"memory": transport}, RunSettings(**settings))  # type: ignore[arg-type]


def run_all(
    transport: MemoryTransport, names: list[str], **settings: float
) -> dict[str, HostOutcome]:
    """The fan-out built inside the event loop, as the API builds it (Python 3.9's asyncio
    primitives bind to the loop they are made in)."""

    async def run() -> dict[str, HostOutcome]:
        return await fan_out(transport, **settings).run(hosts(*names))

    return asyncio.run(run())


def test_every_host_ends_with_exactly_one_outcome_whatever_it_did() -> None:
    transport = MemoryTransport(
        {
            "good": Script(runner_lines(SYSTEM)),
            "denied": Script(error=AuthError("permission denied")),
            "killed": Script(runner_lines({}, done=False), result=ExecResult(None, "KILL")),
        }
    )
    outcomes = run_all(transport, ["good", "denied", "killed"])
    assert {n: o.status for n, o in outcomes.items()} == {
        "good": "ok",
        "denied": "auth_failed",
        "killed": "partial",
    }


def test_a_hanging_host_ends_timeout_and_does_not_hold_the_others() -> None:
    transport = MemoryTransport(
        {"hung": Script(runner_lines(SYSTEM), pause_s=60), "fast": Script(runner_lines(SYSTEM))}
    )
    outcomes = run_all(transport, ["hung", "fast"], timeout_s=0.5)
    assert outcomes["hung"].status == "timeout"
    assert outcomes["fast"].status == "ok"
    assert transport.cancelled == ["hung"]  # the transport was told to stop the remote side


def test_interrupt_marks_pending_hosts_interrupted_and_keeps_finished_ones() -> None:
    transport = MemoryTransport(
        {"slow": Script(runner_lines(SYSTEM), pause_s=60), "fast": Script(runner_lines(SYSTEM))}
    )

    async def interrupted_run() -> dict[str, str]:
        interrupt = asyncio.Event()
        runner = FanOut(
            build_bundle(["system"]),
            {"memory": transport},
            RunSettings(),
            interrupt=interrupt,  # type: ignore[dict-item]
        )
        task = asyncio.ensure_future(runner.run(hosts("slow", "fast")))
        await asyncio.sleep(0.2)
        interrupt.set()
        return {n: o.status for n, o in (await task).items()}

    assert asyncio.run(interrupted_run()) == {"slow": "interrupted", "fast": "ok"}


def test_concurrency_bounds_hosts_at_once() -> None:
    names = [f"h{i}" for i in range(6)]
    transport = MemoryTransport({n: Script(runner_lines(SYSTEM), pause_s=0.05) for n in names})
    in_flight, most = 0, 0
    replay = transport.execute

    async def counting(host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            return await replay(host, script, sink)
        finally:
            in_flight -= 1

    transport.execute = counting  # type: ignore[method-assign]
    outcomes = run_all(transport, [*names], concurrency=2)
    assert {n: o.status for n, o in outcomes.items()} == dict.fromkeys(names, "ok")
    assert most == 2
