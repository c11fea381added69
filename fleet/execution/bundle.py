"""Assembles the one script a host runs: `BUNDLE = {...}` + probes/_host_runner.py.

The probes are ordinary files of the repo (linted, tested, runnable by hand), read at send time,
like mitogen ships its own modules. The script goes on stdin to `<python> -S -c LAUNCHER`: nothing
touches disk.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from fleet.errors import UsageError

RUNNER_FILE = "_host_runner.py"

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


@dataclass(frozen=True)
class ProbeSource:
    name: str
    source: str
    summary: str
    # Files the probe declares with `SHIPS = ("_helper.py",)`: their text travels in the bundle
    # and the runner hands it to the probe as `__shipped__` (nothing is written on the host).
    files: Mapping[str, str] = field(default_factory=dict)


def available_probes() -> dict[str, ProbeSource]:
    """Every probe shipped in the `probes` package, by name, in name order."""
    found: dict[str, ProbeSource] = {}
    for entry in sorted(resources.files("probes").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py") and not entry.name.startswith(("_", ".")):
            source = entry.read_text(encoding="utf-8")
            name = entry.name[:-3]
            found[name] = ProbeSource(name, source, _summary(source), _shipped_files(source))
    return found


def _shipped_files(source: str) -> dict[str, str]:
    """The text of each file named in the probe's `SHIPS` literal (read with `ast`, never run)."""
    files: dict[str, str] = {}
    for name in _ships_declaration(source):
        if not name.startswith("_") or not name.endswith(".py") or "/" in name:
            raise UsageError(
                f"SHIPS names {name!r}", hint="ship only private files beside the probe: _name.py"
            )
        files[name] = resources.files("probes").joinpath(name).read_text(encoding="utf-8")
    return files


def _ships_declaration(source: str) -> tuple[str, ...]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SHIPS" for t in node.targets
        ):
            return tuple(str(n) for n in ast.literal_eval(node.value))
    return ()


def _summary(source: str) -> str:
    """The first line of the module docstring."""
    for quote in ('"""', "'''"):
        if quote in source:
            return source.split(quote, 2)[1].strip().splitlines()[0]
    return ""


def select_probes(names: Sequence[str] | None) -> dict[str, ProbeSource]:
    """The probes `--probes a,b` asks for (all when None); unknown names are a usage error."""
    available = available_probes()
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
        alarm = f"# fleet start-up alarm, seconds: {max(1, math.ceil(deadline_s))}\n"
        return (alarm + f"import json\nBUNDLE = json.loads({literal})\n" + self.runner).encode()


def build_bundle(probe_names: Sequence[str] | None = None) -> Bundle:
    runner = resources.files("probes").joinpath(RUNNER_FILE).read_text(encoding="utf-8")
    return Bundle(runner=runner, probes=select_probes(probe_names))
