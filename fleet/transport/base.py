"""The seam between the orchestrators (the fan-out, fabric rounds) and the wire:
`Transport.open_session`, then `Session.run`. How a script starts on the host is launch.py's.

Two steps, because they cost different things: opening a session (an SSH handshake) is CPU work on
the controller and is bounded by the fan-out's handshake slots; a session that runs a script only
waits on the host, and many stay open at once.
"""

from __future__ import annotations

import asyncio
import contextlib
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
    note: str | None = None  # for the host's hint when nothing else is said (the local transport)


# Receives stdout chunks as they arrive; returns False to stop reading (the output cap was hit).
OutputSink = Callable[[bytes], bool]


# Entered around the handshake itself (after any wait of the transport's own, e.g. for a bastion's
# slots): the fan-out bounds handshakes in flight with it and starts the host's clock on entry.
HandshakeSlot = contextlib.AbstractAsyncContextManager[None]


class Session(Protocol):
    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        """Run `script` (it starts with its start-up alarm; see fleet.transport.launch) on the
        host's Python, stream stdout to `sink`, return how it ended. When cancelled (deadline,
        Ctrl-C) it stops the remote process before re-raising."""
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
