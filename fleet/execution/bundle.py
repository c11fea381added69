"""Assembles the one script a host runs: its start-up alarm, `BUNDLE = {...}`, then
probes/_host_runner.py.

The probes are ordinary files of the repo (linted, tested, runnable by hand), read at send time,
like mitogen ships its own modules. A transport sends the script on stdin to `<python> -S -c
LAUNCHER` (fleet/transport/launch.py): nothing touches disk.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from fleet.errors import UsageError
from fleet.shipped import probe_folder
from fleet.transport.launch import with_alarm

RUNNER_FILE = "_host_runner.py"
PROBE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")  # a probe's name is a fact path's first part


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
        return with_alarm(
            f"import json\nBUNDLE = json.loads({literal})\n" + self.runner, deadline_s
        )


def build_bundle(
    probe_names: Sequence[str] | None = None, extra_dirs: Sequence[str | Path] = ()
) -> Bundle:
    runner = probe_folder().joinpath(RUNNER_FILE).read_text(encoding="utf-8")
    return Bundle(runner=runner, probes=select_probes(probe_names, extra_dirs))
