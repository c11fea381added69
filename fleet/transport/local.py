"""Runs a script in a local subprocess: `fleet probe` (or `fleet fabric`) on this machine, no SSH."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from fleet.errors import NoPythonError
from fleet.models import Host
from fleet.transport.base import (
    ExecResult,
    HandshakeSlot,
    OutputSink,
    execute,
    finish_reading,
    pump,
    read_tail,
)
from fleet.transport.launch import launch_argv


class LocalTransport:
    async def open_session(self, host: Host, handshake: HandshakeSlot) -> LocalSession:
        async with handshake:  # nothing to negotiate: the slot only starts the host's clock
            return LocalSession(host)

    async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        return await execute(self, host, script, sink)

    async def close(self) -> None:
        return None


class LocalSession:
    def __init__(self, host: Host) -> None:
        self.host = host

    async def close(self) -> None:
        return None  # run() stops its process on every exit path

    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        python = os.path.expanduser(self.host.python)  # noqa: ASYNC240 (no I/O: reads $HOME only)
        try:
            # the launch wrapper too: a shim that hangs here is ended by its own deadline even
            # if this controller is killed before it can stop it
            process = await asyncio.create_subprocess_exec(
                *launch_argv(python, script),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError) as exc:  # no /bin/sh: a missing python is 127
            raise NoPythonError(
                f"{python} cannot be started here: {exc.strerror}",
                hint="set python: in the inventory to a Python 3.8+ interpreter",
            ) from exc
        try:
            return await self._talk(process, script, sink)
        finally:
            await _stop(process)

    async def _talk(
        self, process: asyncio.subprocess.Process, script: bytes, sink: OutputSink
    ) -> ExecResult:
        assert process.stdin
        assert process.stdout
        assert process.stderr
        stderr_task = asyncio.ensure_future(read_tail(process.stderr))
        process.stdin.write(script)
        try:
            await process.stdin.drain()
            process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # it died at once; its exit status and stderr say why
        if not await pump(process.stdout, sink):
            _kill_group(process)
        status = await process.wait()
        stderr = await finish_reading(stderr_task)
        if status < 0:
            return ExecResult(
                exit_status=None, exit_signal=signal.Signals(-status).name, stderr_tail=stderr
            )
        return ExecResult(exit_status=status, stderr_tail=stderr)


async def _stop(process: asyncio.subprocess.Process, grace_s: float = 1.0) -> None:
    """SIGTERM lets the host runner kill its probes' process groups; SIGKILL if it does not exit."""
    if process.returncode is not None:
        return
    _kill_group(process, signal.SIGTERM)
    try:
        await asyncio.wait({asyncio.ensure_future(process.wait())}, timeout=grace_s)
    finally:  # also when cancelled while waiting (a deadline during Ctrl-C's clean-up)
        _kill_group(process, signal.SIGKILL)


def _kill_group(process: asyncio.subprocess.Process, signum: int = signal.SIGKILL) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
