"""Which Python "this machine" means: the interpreter the local transport starts the probes with.

A user runs fleet from somewhere: often from the very environment that holds their torch (`pip
install` into it, `python3 -m fleet`), sometimes from an environment of fleet's own. An inventory
that names the interpreter by a bare name (`python: python3`, inventory/local.yaml) is answered by
evidence, not by PATH order alone. Two candidates:

- fleet's own: the interpreter running fleet (sys.executable), in fleet's environment as it is;
- the machine's: `python3` as a shell outside fleet's virtual environment finds it (fleet's bin
  folders left out of PATH, VIRTUAL_ENV unset), in that cleaned environment.

The one with the user's GPU stack (torch findable by importlib's find_spec: in this process for
fleet's own, in a short child process for the machine's; torch is never imported for this) is
probed. fleet's own is asked first and wins when it has torch, whatever the machine's has (the
user installed fleet beside their torch: no second interpreter is started); the machine's when
fleet's own has none, with torch or not (a GPU-less host, or torch lives elsewhere: `python:`
names it). The note says which rule chose, once, on the
host's line. A path (`python: /opt/venv/bin/python3`) is the user's own word and is taken as it is.
Remote hosts are not affected: their `python:` runs as their login shell finds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.machinery
import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# How long one interpreter may take to answer whether it has torch: a pyenv shim or a conda
# wrapper can be slow to start, and a hung one must not hold the run (it then counts as "no").
LOOKUP_TIMEOUT_S = 10.0

# The question put to each candidate: is torch findable? find_spec reads the path entries only.
_HAS_TORCH = (
    "import importlib.util as u,sys;"
    "sys.stdout.write('yes' if u.find_spec('torch') is not None else 'no')"
)


@dataclass(frozen=True)
class UserPython:
    """The interpreter to start, the environment to start it in, and what the host's line says
    of the choice (None when there was nothing to choose)."""

    path: str
    environ: Mapping[str, str]
    note: str | None = None


@dataclass(frozen=True)
class Candidates:
    """The two interpreters a bare name can mean on this machine (see the module's doc)."""

    name: str  # as the inventory wrote it: python3
    own: str | None  # fleet's own interpreter, when it answers to `name`
    own_environ: Mapping[str, str]
    machine: str | None  # `name` on PATH outside fleet's environment
    machine_environ: Mapping[str, str]


def fleets_own_bins(environ: Mapping[str, str]) -> set[str]:
    """The bin folders of the virtual environment fleet runs in (activated or not)."""
    prefixes = [environ.get("VIRTUAL_ENV", "")]
    if sys.prefix != sys.base_prefix:
        prefixes.append(sys.prefix)
    return {os.path.realpath(os.path.join(p, "bin")) for p in prefixes if p}


def answers_to(name: str) -> bool:
    """Whether fleet's own interpreter is what `name` asks for: python, python3, python3.N."""
    major, minor = sys.version_info[:2]
    return name in ("python", f"python{major}", f"python{major}.{minor}")


def own_interpreter() -> str:
    """The interpreter running fleet (a function, so tests can stand another in)."""
    return sys.executable


def candidates(name: str, environ: Mapping[str, str]) -> Candidates:
    """fleet's own interpreter (if it answers to `name`) and the machine's `name`."""
    own = own_interpreter()
    bins = fleets_own_bins(environ)
    folders = environ.get("PATH", os.defpath).split(os.pathsep)
    outside = os.pathsep.join(f for f in folders if os.path.realpath(f or ".") not in bins)
    clean = {k: v for k, v in environ.items() if k != "VIRTUAL_ENV"} | {"PATH": outside}
    machine = shutil.which(name, path=outside)
    mine = own if own and answers_to(name) else None
    if mine is None and bins:  # fleet's venv may still hold `name` (python3.12 in a 3.12 venv)
        found = shutil.which(name, path=os.pathsep.join(folders))
        mine = found if found and os.path.realpath(os.path.dirname(found)) in bins else None
    return Candidates(name, mine, environ, machine, clean)


async def has_torch(path: str, environ: Mapping[str, str]) -> bool:
    """Whether torch is findable by the interpreter at `path` (never imported: find_spec).
    fleet's own interpreter is asked in this process (no second interpreter start), with the
    paths the bundle will see: the current folder left out, as the host runner leaves it out."""
    if path == sys.executable and environ is os.environ:
        return torch_on_path(sys.path)
    try:
        process = await asyncio.create_subprocess_exec(
            path,
            "-c",
            _HAS_TORCH,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,  # a shim's children are ended with it on a timeout
            env=dict(environ),
        )
    except OSError:
        return False  # cannot be started: the probe run says so in its own words
    try:
        out, _ = await asyncio.wait_for(process.communicate(), LOOKUP_TIMEOUT_S)
    except asyncio.TimeoutError:
        return False
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    return out.strip() == b"yes"


def torch_on_path(paths: Sequence[str]) -> bool:
    """Whether a torch package is on `paths`, the current folder's entries left out."""
    here = os.getcwd()
    kept = [p for p in paths if p not in ("", ".") and os.path.abspath(p) != here]
    return importlib.machinery.PathFinder.find_spec("torch", kept) is not None


async def choose(name: str, environ: Mapping[str, str] = os.environ) -> UserPython:
    """The interpreter `python: NAME` means on this machine (see the module's doc)."""
    if os.sep in name:  # a path is the user's own word
        return as_written(name, environ)
    found = candidates(name, environ)
    if found.own is None or found.machine is None or found.own == found.machine:
        return _only_one(found)
    if await has_torch(found.own, found.own_environ):  # fleet's own wins: nothing more to ask
        why = f"fleet's own {name}, which has torch (fleet's own comes first)"
        return UserPython(found.own, found.own_environ, f"probed {found.own}, {why}")
    return decide(found, await has_torch(found.machine, found.machine_environ))


def as_written(path: str, environ: Mapping[str, str]) -> UserPython:
    return UserPython(os.path.expanduser(path), environ)


def decide(found: Candidates, machine_has: bool) -> UserPython:
    """fleet's own has no torch: the machine's, whether or not it has (a tie without torch goes
    to the machine's); the note says which rule chose."""
    assert found.own is not None
    assert found.machine is not None
    own, machine, name = found.own, found.machine, found.name
    if machine_has:
        why = f"{name} on PATH, the one with torch (fleet's own {own} has none)"
    else:
        why = f"{name} on PATH: neither it nor fleet's own {own} has torch"
    return UserPython(machine, found.machine_environ, f"probed {machine}, {why}")


def _only_one(found: Candidates) -> UserPython:
    """No choice to make: the machine's alone, fleet's own alone, or neither (exit 127 later)."""
    if found.machine is not None:
        return UserPython(found.machine, found.machine_environ)
    if found.own is None:
        return UserPython(found.name, found.machine_environ)  # not found: said as no_python
    note = (
        f"probed {found.own}, fleet's own {found.name}: no other {found.name} is on PATH; "
        "set python: to the interpreter whose packages you mean to probe"
    )
    return UserPython(found.own, found.own_environ, note)
