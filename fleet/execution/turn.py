"""One host's turn: open a session, run one script, close, under the host's own deadline.

What every orchestrator does per host, in one place: the fan-out (`fleet probe`) for each host, and
`fleet fabric` for each host of its discovery and of every group. The host's clock
(execution/deadline.py) starts when its handshake does (on entering the caller's handshake slot,
or at once where the caller bounds nothing) and covers connecting and running.

A turn never raises for its host. It ends with how the script ended, or with the HostError that
ended the host first (an exception no transport mapped becomes `lost NAME (TARGET)`), or with its
deadline passed. Only a cancellation that is not the deadline's (Ctrl-C) goes through. Under
`--debug` (logger `fleet`) each failure is logged with its cause chain, and each deadline passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from fleet.errors import HostError, UnreachableError
from fleet.execution.deadline import Deadline
from fleet.models import Host
from fleet.transport.base import ExecResult, HandshakeSlot, OutputSink, Transport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Turn:
    """How one host's turn ended: at most one of `result` and `error` is set."""

    result: ExecResult | None = None  # how the script ended, as the transport saw it
    error: HostError | None = None  # what ended the host before the script could
    timed_out: bool = False  # the deadline passed before the transport answered


# Given the host's deadline, the handshake slot to open its session in; entering it starts the clock.
SlotFor = Callable[[Deadline], HandshakeSlot]


@contextlib.asynccontextmanager
async def clock_only(deadline: Deadline) -> AsyncIterator[None]:
    """A handshake slot that bounds nothing: it only starts the host's clock."""
    deadline.start()
    yield


async def take_turn(
    transport: Transport,
    host: Host,
    script: bytes,
    sink: OutputSink,
    timeout_s: float,
    *,
    slot: SlotFor = clock_only,
    on_running: Callable[[], None] | None = None,
) -> Turn:
    """Run `script` on `host` within `timeout_s` from its handshake; see the module docstring.
    `on_running` is called once the script has started there: with the host's first output."""
    deadline = Deadline(timeout_s)
    result: ExecResult | None = None
    try:
        result = await _session(transport, host, script, sink, deadline, slot, on_running)
    except asyncio.CancelledError:
        if not deadline.expired:
            raise  # Ctrl-C: the caller concludes this host as interrupted
    except HostError as exc:
        if not deadline.expired:
            return _failed(host, exc)
    except Exception as exc:  # noqa: BLE001 (an error no transport mapped costs only this host)
        if not deadline.expired:
            return _failed(host, lost(host, exc))
    finally:
        deadline.stop()
    if deadline.expired:
        deadline.absorb()  # whatever the cancellation became on its way out
        log.debug("%s: deadline of %g s passed", host.name, timeout_s)
    return Turn(result, timed_out=deadline.expired and result is None)


async def _session(
    transport: Transport,
    host: Host,
    script: bytes,
    sink: OutputSink,
    deadline: Deadline,
    slot: SlotFor,
    on_running: Callable[[], None] | None,
) -> ExecResult:
    """Connect (within the handshake slot), then run the script; the deadline covers both."""
    session = await transport.open_session(host, slot(deadline))
    deadline.start()  # already running unless the transport had no handshake to enter
    try:
        return await session.run(script, _running_on_first_output(sink, on_running))
    finally:
        await session.close()


def _running_on_first_output(sink: OutputSink, on_running: Callable[[], None] | None) -> OutputSink:
    """`sink`, calling `on_running` once, before the host's first output. Not sooner: what it
    starts (the judging's modules read on threads) would hold the GIL while this controller
    starts the host, and this machine's host would wait for it before its interpreter is even
    launched."""
    if on_running is None:
        return sink
    pending = [on_running]

    def first_output_runs(chunk: bytes) -> bool:
        if pending:
            pending.pop()()
        return sink(chunk)

    return first_output_runs


def _failed(host: Host, exc: HostError) -> Turn:
    log.debug("%s: %s", host.name, exc.message, exc_info=exc)  # --debug shows the cause chain
    return Turn(error=exc)


def lost(host: Host, exc: Exception) -> UnreachableError:
    """An exception no transport mapped, as the host's error: `lost NAME (TARGET)`."""
    error = UnreachableError(f"lost {host.name} ({host.target()})", context=repr(exc))
    error.__cause__ = exc
    return error


def host_error_line(exc: HostError) -> str:
    """A host's error in one line, as its outcome shows it: `message: context`."""
    return exc.message + (f": {exc.context}" if exc.context else "")
