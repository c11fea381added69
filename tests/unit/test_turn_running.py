"""A host counts as running once its script has started there (its first output), not when its
session opens: what starts then (the judging's modules read on threads) must not hold the GIL
while this controller is still launching the host. Real local subprocesses."""

from __future__ import annotations

import asyncio
import sys

from fleet.execution.turn import take_turn
from fleet.models import Host
from fleet.transport.base import ExecResult, HandshakeSlot, OutputSink
from fleet.transport.launch import with_alarm
from fleet.transport.local import LocalTransport

HOST = Host(name="local", address="localhost", transport="local", python=sys.executable)


def turn_of(body: str) -> list[str]:
    seen: list[str] = []

    def sink(chunk: bytes) -> bool:
        seen.append("output")
        return True

    turn = asyncio.run(
        take_turn(
            LocalTransport(), HOST, with_alarm(body, 10), sink, 30,
            on_running=lambda: seen.append("running"),
        )
    )  # fmt: skip
    assert turn.result is not None
    return seen


def test_running_is_said_once_just_before_the_first_output() -> None:
    seen = turn_of("import sys, time\nprint('one', flush=True)\ntime.sleep(0.2)\nprint('two')\n")
    assert seen[:2] == ["running", "output"]
    assert seen.count("running") == 1
    assert seen.count("output") >= 2


class Silent:
    """A session that runs the script and says nothing (a host whose interpreter hangs)."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def open_session(self, host: Host, handshake: HandshakeSlot) -> Silent:
        async with handshake:
            return self

    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        self.calls.append("script sent")
        return ExecResult(exit_status=0)

    async def close(self) -> None:
        return None


def test_a_host_that_never_answers_never_counts_as_running() -> None:
    calls: list[str] = []
    asyncio.run(
        take_turn(
            Silent(calls), HOST, with_alarm("", 10), lambda chunk: True, 30,
            on_running=lambda: calls.append("running"),
        )
    )  # fmt: skip
    assert calls == ["script sent"]
