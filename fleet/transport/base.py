"""The seam between the runner and the wire: `Transport.open_session`, then `Session.run`.

Two steps, because they cost different things: opening a session (an SSH handshake) is CPU work on
the controller and is bounded by the fan-out's handshake slots; a session that runs the bundle only
waits on the host, and many stay open at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

from fleet.models import Host

READ_CHUNK = 65536
DEFAULT_OUTPUT_LIMIT = 16 * 1024 * 1024  # a host's stdout cap: past it, output_truncated
STDERR_TAIL_BYTES = 4096


@dataclass
class ExecResult:
    """How the remote interpreter ended, as the transport saw it."""

    exit_status: int | None
    exit_signal: str | None = None
    stderr_tail: str = ""


# Receives stdout chunks as they arrive; returns False to stop reading (the output cap was hit).
OutputSink = Callable[[bytes], bool]


# Entered around the handshake itself (after any wait of the transport's own, e.g. for a bastion's
# slots): the fan-out bounds handshakes in flight with it and starts the host's clock on entry.
HandshakeSlot = contextlib.AbstractAsyncContextManager[None]


class Session(Protocol):
    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        """Run `script` (`launch_argv(python, script)`, script on stdin), stream stdout to `sink`,
        return how it ended. When cancelled (deadline, Ctrl-C) it stops the remote process before
        re-raising."""
        ...

    async def close(self) -> None:
        """Release the connection at once (never waits on a hung host)."""
        ...


class Transport(Protocol):
    async def open_session(self, host: Host, handshake: HandshakeSlot) -> Session:
        """Connect to `host`, entering `handshake` around the work that costs controller CPU.

        Raises a fleet.errors.HostError when the host cannot be reached; when cancelled it
        releases what it opened before re-raising."""
        ...

    async def close(self) -> None:
        """Release shared resources (e.g. bastion connections)."""
        ...


@contextlib.asynccontextmanager
async def no_slot() -> AsyncIterator[None]:
    """A handshake slot that bounds nothing (a session opened outside the fan-out)."""
    yield


async def execute(transport: Transport, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
    """Open a session, run `script`, close it: one host, unbounded (tests, one-off tools)."""
    session = await transport.open_session(host, no_slot())
    try:
        return await session.run(script, sink)
    finally:
        await session.close()


class Executes(Protocol):
    async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult: ...


class ExecuteSession:
    """The session of a transport whose hosts have no connection of their own to open (Slurm's
    one shared step, an in-memory test transport): `run` is the transport's `execute`."""

    def __init__(self, transport: Executes, host: Host) -> None:
        self.transport, self.host = transport, host

    @classmethod
    async def open(cls, transport: Executes, host: Host, handshake: HandshakeSlot) -> Session:
        async with handshake:  # nothing to negotiate: the slot only starts the host's clock
            return cls(transport, host)

    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        return await self.transport.execute(self.host, script, sink)

    async def close(self) -> None:
        return None  # `execute` releases what it used on every exit path


class ByteReader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


async def pump(reader: ByteReader, sink: OutputSink) -> bool:
    """Copy reader → sink until EOF; return False if the sink refused more (over its cap)."""
    while True:
        chunk = await reader.read(READ_CHUNK)
        if not chunk:
            return True
        if not sink(chunk):
            return False


async def read_tail(reader: ByteReader, limit: int = STDERR_TAIL_BYTES) -> str:
    """Read to EOF keeping only the last `limit` bytes (stderr can be arbitrarily long)."""
    tail = b""
    while chunk := await reader.read(READ_CHUNK):
        tail = (tail + chunk)[-limit:]
    return tail.decode("utf-8", "replace")


async def finish_reading(stderr_task: asyncio.Task[str], wait_s: float = 2.0) -> str:
    """The stderr tail, without waiting forever for a stream a lingering child keeps open."""
    # asyncio.wait, not wait_for: its timeout raises no exception, whose class differs before 3.11
    done, _ = await asyncio.wait({stderr_task}, timeout=wait_s)
    if not done:
        stderr_task.cancel()
        return ""
    return stderr_task.result()


MAX_LAUNCH_LINE = 256


class LaunchReport:
    """A sink in front of another that reads the launch wrapper's first line,
    `{"type":"launch","pgid":N}` (fleet.execution.bundle.LAUNCH_WRAPPER): the process group to end
    on the host when we give up on it. Every byte still goes to the sink behind it."""

    def __init__(self, sink: OutputSink) -> None:
        self.sink = sink
        self.pgid: int | None = None
        self._head: bytes | None = b""  # None once the first line has been read

    def __call__(self, chunk: bytes) -> bool:
        if self._head is not None:
            self._read_head(chunk)
        return self.sink(chunk)

    def _read_head(self, chunk: bytes) -> None:
        assert self._head is not None
        self._head += chunk
        line, newline, _ = self._head.partition(b"\n")
        if newline or len(self._head) > MAX_LAUNCH_LINE:
            self.pgid = launch_pgid(line[:MAX_LAUNCH_LINE])
            self._head = None


def launch_pgid(line: bytes) -> int | None:
    """The process group in a launch line; None for anything else. Group ids 0 and 1 are never
    ours to end (`kill -TERM -1` would reach every process of the user)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("type") != "launch":
        return None
    pgid = message.get("pgid")
    valid = isinstance(pgid, int) and not isinstance(pgid, bool) and 1 < pgid < 2**31
    return pgid if valid else None
