"""An in-memory transport for fast fan-out tests: each host replays scripted host-runner output.

The real transports (local subprocess, real sshd) have their own suites; this one exists so the
fan-out's own rules (one outcome per host, deadlines, errors, Ctrl-C) are tested in milliseconds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.errors import HostError
from fleet.execution.protocol import ExecResult
from fleet.models import Host
from fleet.transport.base import ExecuteSession, HandshakeSlot, OutputSink, Session


def runner_lines(probes: Mapping[str, Mapping[str, Any]], done: bool = True) -> list[bytes]:
    """What a host runner writes for these probe results: hello, one line per probe, done."""
    messages: list[dict[str, Any]] = [{"type": "hello", "protocol": 1, "python": "3.12.3"}]
    for name, data in probes.items():
        messages.append(
            {"type": "probe", "name": name, "status": "ok", "data": dict(data), "elapsed_s": 0.01}
        )
    if done:
        messages.append({"type": "done"})
    return [json.dumps(m).encode() + b"\n" for m in messages]


@dataclass
class Script:
    """How one host behaves: lines written (with a pause before each), how it ends, or an error."""

    lines: Sequence[bytes] = ()
    pause_s: float = 0.0
    result: ExecResult = field(default_factory=lambda: ExecResult(0))
    error: HostError | None = None


@dataclass
class MemoryTransport:
    scripts: Mapping[str, Script]
    executed: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    closed: bool = False

    async def open_session(self, host: Host, handshake: HandshakeSlot) -> Session:
        return await ExecuteSession.open(self, host, handshake)

    async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        self.executed.append(host.name)
        plan = self.scripts[host.name]
        if plan.error is not None:
            raise plan.error
        try:
            for line in plan.lines:
                await asyncio.sleep(plan.pause_s)
                if not sink(line):
                    return ExecResult(None, "closed: output over its cap")
        except asyncio.CancelledError:
            self.cancelled.append(host.name)
            raise
        return plan.result

    async def close(self) -> None:
        self.closed = True
