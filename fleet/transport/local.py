"""Runs a script in a local subprocess: `fleet probe` (or `fleet fabric`) on this machine, no SSH.

"This machine" is the user's machine, not fleet's own environment: an interpreter given by name
(`python: python3`) is found on PATH as the user's shell outside fleet's virtual environment
would find it (the venv's bin, $VIRTUAL_ENV/bin or sys.prefix/bin, left out of PATH), and it runs
with that PATH and without VIRTUAL_ENV. When fleet's venv holds the only such interpreter, it is
used, and the host's hint says that it is fleet's own environment; when another is used, the
hint names both (fleet installed into the environment whose torch you meant to probe is told
how to probe it: `python:`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True)
class UserPython:
    """The interpreter to start, the environment to start it in, and a note for the host's hint
    (None, unless it is fleet's own environment)."""

    path: str
    environ: Mapping[str, str]
    note: str | None = None


def fleets_own_bins(environ: Mapping[str, str]) -> set[str]:
    """The bin folders of the virtual environment fleet runs in (activated or not)."""
    prefixes = [environ.get("VIRTUAL_ENV", "")]
    if sys.prefix != sys.base_prefix:
        prefixes.append(sys.prefix)
    return {os.path.realpath(os.path.join(p, "bin")) for p in prefixes if p}


def user_python(python: str, environ: Mapping[str, str] = os.environ) -> UserPython:
    """`python` as a user's shell outside fleet's venv finds it (see the module's doc)."""
    own = fleets_own_bins(environ)
    folders = environ.get("PATH", os.defpath).split(os.pathsep)
    outside = os.pathsep.join(f for f in folders if os.path.realpath(f or ".") not in own)
    clean = {k: v for k, v in environ.items() if k != "VIRTUAL_ENV"} | {"PATH": outside}
    if os.sep in python or not own:  # a path is the user's own word
        return UserPython(os.path.expanduser(python), environ)
    found = shutil.which(python, path=outside)
    mine = shutil.which(python, path=os.pathsep.join(folders))
    if found:
        if mine and os.path.realpath(os.path.dirname(mine)) in own:  # fleet's own came first
            note = (
                f"{python} here is {found}, as your shell finds it outside fleet's own virtual "
                f"environment ({mine}); set python: {mine} to probe that one"
            )
            return UserPython(found, clean, note)
        return UserPython(found, clean)
    if mine is None:
        return UserPython(python, clean)  # not found: exit 127, said as no_python
    note = (
        f"{python} is fleet's own virtual environment ({mine}): no other {python} is on PATH; "
        "set python: to the interpreter whose packages you mean to probe"
    )
    return UserPython(mine, environ, note)


class LocalSession:
    def __init__(self, host: Host) -> None:
        self.host = host

    async def close(self) -> None:
        return None  # run() stops its process on every exit path

    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        chosen = user_python(self.host.python)
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
