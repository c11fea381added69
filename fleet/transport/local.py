"""Runs a script in a local subprocess: `fleet probe` (or `fleet fabric`, `fleet jobs`) on this
machine, no SSH. Which interpreter "this machine" means is fleet.transport.local_python's: the one
of fleet's own and the machine's `python3` that has the user's torch, said on the host's line."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
from collections.abc import Awaitable, Callable

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
from fleet.transport.local_python import UserPython, choose


class LocalTransport:
    def __init__(self) -> None:
        # one choice per interpreter name for the whole run: every local host (and every fabric
        # round) asks the same question, and the answer costs two interpreter starts
        self._pythons: dict[str, asyncio.Future[UserPython]] = {}

    async def open_session(self, host: Host, handshake: HandshakeSlot) -> LocalSession:
        async with handshake:  # nothing to negotiate: the slot only starts the host's clock
            return LocalSession(host, self.python_for)

    async def python_for(self, name: str) -> UserPython:
        """The interpreter `python: name` means here (fleet.transport.local_python)."""
        if name not in self._pythons:
            self._pythons[name] = asyncio.ensure_future(choose(name))
        return await asyncio.shield(self._pythons[name])

    async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        return await execute(self, host, script, sink)

    async def close(self) -> None:
        return None


class LocalSession:
    def __init__(self, host: Host, python_for: Callable[[str], Awaitable[UserPython]]) -> None:
        self.host = host
        self.python_for = python_for

    async def close(self) -> None:
        return None  # run() stops its process on every exit path

    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        chosen = await self.python_for(self.host.python)
        python = chosen.path
        try:
            # the launch wrapper too: a shim that hangs here is ended by its own deadline even
            # if this controller is killed before it can stop it
            process = await asyncio.create_subprocess_exec(
                *launch_argv(python, script),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env=dict(chosen.environ),
            )
        except (FileNotFoundError, PermissionError) as exc:  # no /bin/sh: a missing python is 127
            raise NoPythonError(
                f"{python} cannot be started here: {exc.strerror}",
                hint="set python: in the inventory to a Python 3.8+ interpreter",
            ) from exc
        try:
            result = await self._talk(process, script, sink)
        finally:
            await _stop(process)
        return dataclasses.replace(result, note=chosen.note) if chosen.note else result

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
