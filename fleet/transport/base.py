"""The one seam between the fan-out and the wire: `Transport.execute`, and how it ended."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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


class Transport(Protocol):
    async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        """Run `script` on `host` (`<python> *LAUNCH_ARGS`, script on stdin), stream stdout to
        `sink`, return how it ended.

        Raises a fleet.errors.HostError when the host cannot be reached. When cancelled (deadline,
        Ctrl-C) it must stop the remote process and release the connection before re-raising.
        """
        ...

    async def close(self) -> None:
        """Release shared resources (e.g. bastion connections)."""
        ...


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
    try:
        return await asyncio.wait_for(asyncio.shield(stderr_task), wait_s)
    except TimeoutError:
        stderr_task.cancel()
        return ""
