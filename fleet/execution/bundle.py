"""Assembles the one script a host runs: `BUNDLE = {...}` + probes/_host_runner.py.

The probes are ordinary files of the repo (linted, tested, runnable by hand), read at send time,
like mitogen ships its own modules. The script goes on stdin to `<python> -S -c LAUNCHER`: nothing
touches disk.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from fleet.errors import UsageError
from fleet.shipped import probe_folder

RUNNER_FILE = "_host_runner.py"
ALARM_HEAD = "# fleet start-up alarm, seconds: "

# How every transport starts a script. The launcher reads the script's first line (its alarm, see
# Bundle.script) and sets that alarm before site-packages are imported: a sitecustomize, a .pth
# file or a hung mount that blocks Python's start then cannot outlive the run on the host, even
# where sshd will not deliver our signals. Then `site` runs as usual and the script runs as
# `__main__`, as under `python -`. Python 2 gets as far as compiling the script: a SyntaxError.
LAUNCHER = (
    "import signal,sys;_in=getattr(sys.stdin,'buffer',sys.stdin);_head=_in.readline();"
    "signal.alarm(int(_head.split()[-1]));import site;site.main();"
    "exec(compile(_head+_in.read(),'<fleet bundle>','exec'))"
)
LAUNCH_ARGS = ("-S", "-c", LAUNCHER)
PROBE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")  # a probe's name is a fact path's first part

# Seconds between the runner's own alarm and the host-side `timeout` (TERM), and again until KILL.
# The runner's alarm normally ends a run first (it reports which probes were pending); `timeout`
# is the backstop for what happens before Python runs our first line.
LAUNCH_GRACE_S = 2

# The interpreter runs under this POSIX-sh wrapper: `sh -c LAUNCH_WRAPPER fleet-launch DEADLINE
# GRACE PYTHON ARGS...`. An interpreter that is a shim (pyenv, conda waiting on a lock, a `module`
# wrapper, a stuck automount) hangs before the launcher's alarm is set; under coreutils `timeout -k`
# it and everything it started in its process group get TERM at DEADLINE and KILL GRACE seconds
# later, whether or not the controller is still there (sshd delivers no signals to root sessions
# before OpenSSH 10, and a closed channel kills nothing). `timeout` makes itself the leader of a
# process group whose id is its pid: the wrapper reports it first (`{"type":"launch","pgid":N}`),
# so the controller can end that group over a second channel at its own deadline. Without a
# working `timeout` (not in coreutils before 7.0; old busybox lacks -k), a background watchdog
# kills the wrapper's process group instead (its session under sshd). `timeout` is not wrapped in
# setsid(1): it would fork where the wrapper already leads a process group (the usual case under
# sshd), and the exit status would then be lost. A leading ~/ is the remote user's home. One line,
# no single quote: csh and fish login shells get it as one quoted word.
LAUNCH_WRAPPER = (
    "d=$1; g=$2; p=$3; shift 3; "
    'case $p in "~/"*) p=$HOME/${p#"~/"};; esac; '
    "if timeout -k 1 9 true >/dev/null 2>&1; then "
    r'printf "{\"type\":\"launch\",\"pgid\":%d}\n" $$; '
    'exec timeout -k "$g" "$d" "$p" "$@"; fi; '
    '(trap "" TERM; n=0; while kill -0 $$; do if [ $n -ge "$d" ]; then '
    'kill -TERM 0; sleep "$g"; kill -KILL 0; fi; sleep 1; n=$((n+1)); done) '
    "</dev/null >/dev/null 2>&1 & "
    'exec "$p" "$@"'
)
LAUNCH_NAME = "fleet-launch"  # $0 of the wrapper: what `ps` shows until the interpreter runs


def launch_argv(python: str, script: bytes) -> list[str]:
    """How every transport starts `script` (on stdin) with `python`, as an argv for exec."""
    deadline = start_up_alarm(script) + LAUNCH_GRACE_S
    return [
        "sh",
        "-c",
        LAUNCH_WRAPPER,
        LAUNCH_NAME,
        str(deadline),
        str(LAUNCH_GRACE_S),
        python,
        *LAUNCH_ARGS,
    ]


def start_up_alarm(script: bytes) -> int:
    """The alarm seconds on the script's first line (written by Bundle.script, read by LAUNCHER)."""
    head = script.split(b"\n", 1)[0]
    if not head.startswith(ALARM_HEAD.encode()):
        raise ValueError("not a fleet bundle: its first line is not the start-up alarm")
    return int(head.split()[-1])


@dataclass(frozen=True)
class ProbeSource:
    name: str
    source: str
    summary: str
    # Files the probe declares with `SHIPS = ("_helper.py",)`: their text travels in the bundle
    # and the runner hands it to the probe as `__shipped__` (nothing is written on the host).
    files: Mapping[str, str] = field(default_factory=dict)


PROBE_DIR_ENV = "FLEET_PROBE_DIR"  # your own probe folders, separated like PATH


def probe_dirs(extra: Sequence[str | Path] = ()) -> list[Path]:
    """Folders of your own probes: `extra` (--probe-dir) first, then $FLEET_PROBE_DIR's."""
    from_env = [p for p in os.environ.get(PROBE_DIR_ENV, "").split(os.pathsep) if p]
    return [Path(p).expanduser() for p in [*extra, *from_env]]


def available_probes(extra_dirs: Sequence[str | Path] = ()) -> dict[str, ProbeSource]:
    """Every probe by name, in name order: fleet's own, then those in `probe_dirs(extra_dirs)`,
    which follow the same contract (probes/README.md) and travel in the same bundle."""
    found = _probes_in(probe_folder(), "fleet's probes")
    for folder in probe_dirs(extra_dirs):
        for name, probe in _probes_in(_readable_dir(folder), str(folder)).items():
            if name in found:
                raise UsageError(
                    f"probe {name!r} in {folder} has the name of another probe",
                    hint="rename the file: probe names must be unique",
                )
            found[name] = probe
    return dict(sorted(found.items()))


def _probes_in(folder: Traversable, where: str) -> dict[str, ProbeSource]:
    found: dict[str, ProbeSource] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py") and not entry.name.startswith(("_", ".")):
            name = entry.name[:-3]
            if not PROBE_NAME.match(name):
                raise UsageError(
                    f"{where}: {entry.name!r} is not a valid probe name",
                    hint="letters, digits and '_', starting with a letter",
                )
            source = entry.read_text(encoding="utf-8")
            found[name] = ProbeSource(
                name, source, _summary(source), _shipped_files(source, folder)
            )
    return found


def _readable_dir(folder: Path) -> Path:
    if not folder.is_dir():
        raise UsageError(
            f"probe folder {folder} does not exist or is not a folder",
            hint=f"check --probe-dir and ${PROBE_DIR_ENV}",
        )
    return folder


def _shipped_files(source: str, folder: Traversable) -> dict[str, str]:
    """The text of each file named in the probe's `SHIPS` literal (read with `ast`, never run),
    from the probe's own folder."""
    files: dict[str, str] = {}
    for name in _ships_declaration(source):
        if not name.startswith("_") or not name.endswith(".py") or "/" in name:
            raise UsageError(
                f"SHIPS names {name!r}", hint="ship only private files beside the probe: _name.py"
            )
        files[name] = folder.joinpath(name).read_text(encoding="utf-8")
    return files


def _ships_declaration(source: str) -> tuple[str, ...]:
    return tuple(str(n) for n in declared_literal(source, "SHIPS") or ())


def declared_literal(source: str, name: str) -> Any:
    """A probe's top-level `NAME = <literal>` (SHIPS, FACTS…), read with `ast`, never run; None
    when the probe has none."""
    node = _top_level_assignments(source).get(name)
    return None if node is None else ast.literal_eval(node)


@functools.lru_cache(maxsize=64)
def _top_level_assignments(source: str) -> dict[str, ast.expr]:
    """Each top-level name's first assigned expression. Cached: every command reads the same
    probe files several times (bundle, facts declarations), and parsing them is the cost."""
    found: dict[str, ast.expr] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, node.value)
    return found


def _summary(source: str) -> str:
    """The first line of the module docstring."""
    for quote in ('"""', "'''"):
        if quote in source:
            return source.split(quote, 2)[1].strip().splitlines()[0]
    return ""


def select_probes(
    names: Sequence[str] | None, extra_dirs: Sequence[str | Path] = ()
) -> dict[str, ProbeSource]:
    """The probes `--probes a,b` asks for (all when None); unknown names are a usage error."""
    available = available_probes(extra_dirs)
    if not names:
        return available
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UsageError(
            f"unknown probe {unknown[0]!r}", hint="available probes: " + ", ".join(available)
        )
    return {n: available[n] for n in dict.fromkeys(names)}


@dataclass(frozen=True)
class Bundle:
    """The code part of a script: the runner and the selected probes. Options vary per host."""

    runner: str
    probes: Mapping[str, ProbeSource]

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256(self.runner.encode())
        for name, probe in self.probes.items():
            digest.update(f"\0{name}\0".encode())
            digest.update(probe.source.encode())
            for file_name, text in sorted(probe.files.items()):
                digest.update(f"\0{name}/{file_name}\0".encode())
                digest.update(text.encode())
        return digest.hexdigest()

    def script(self, options: Mapping[str, Any], deadline_s: float, parallel: int) -> bytes:
        """The whole program for one host: its start-up alarm, a literal BUNDLE, the runner."""
        payload = {
            "probes": {n: p.source for n, p in self.probes.items()},
            "options": {n: dict(options.get(n) or {}) for n in self.probes},
            "files": {n: dict(p.files) for n, p in self.probes.items() if p.files},
            "deadline_s": deadline_s,
            "parallel": parallel,
        }
        # json → Python literal via json.loads: values from YAML can be dates, so normalize first.
        literal = json.dumps(json.dumps(payload, default=str))
        alarm = f"{ALARM_HEAD}{max(1, math.ceil(deadline_s))}\n"
        return (alarm + f"import json\nBUNDLE = json.loads({literal})\n" + self.runner).encode()


def build_bundle(
    probe_names: Sequence[str] | None = None, extra_dirs: Sequence[str | Path] = ()
) -> Bundle:
    runner = probe_folder().joinpath(RUNNER_FILE).read_text(encoding="utf-8")
    return Bundle(runner=runner, probes=select_probes(probe_names, extra_dirs))
