"""Assembles the one script a host runs: its start-up alarm, `BUNDLE = {...}`, then
probes/runner/_host_runner.py (the runner's own modules, its RUNNER_MODULES, travel in BUNDLE).

The probes are ordinary files of the repo (linted, tested, runnable by hand), read at send time,
like mitogen ships its own modules. A transport sends the script on stdin to `<python> -S -c
LAUNCHER` (fleet/transport/launch.py): nothing touches disk.

A probe file that cannot be used (a syntax error, a SHIPS or FACTS that is no literal) costs only
itself: it is listed with its `problem` (FILE:LINE: why), selecting it is a UsageError, and left
out it is a warning (Bundle.warnings).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from fleet.errors import UsageError
from fleet.shipped import helper_file, probe_folder, runner_folder
from fleet.transport.launch import with_alarm

RUNNER_FILE = "_host_runner.py"
PROBE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")  # a probe's name is a fact path's first part
# What a probe's FACTS may declare (fleet/analysis/facts.py: the four kinds, and "hardware").
FACTS_KEYS = ("identity", "volatile", "measure", "sets", "hardware")


@dataclass(frozen=True)
class ProbeSource:
    name: str
    source: str
    summary: str
    # Files the probe declares with `SHIPS = ("_helper.py",)`: their text travels in the bundle
    # and the runner hands it to the probe as `__shipped__` (nothing is written on the host).
    files: Mapping[str, str] = field(default_factory=dict)
    # The probe's file, under its folder as the user named it (myprobes/gpu_clocks.py; fleet's
    # own: probes/gpu.py): what errors, and the host's tracebacks, call it.
    path: str = ""
    # Why the probe cannot be used, FILE:LINE first (`myprobes/x.py:3: SyntaxError: …`); empty
    # when it can.
    problem: str = ""


PROBE_DIR_ENV = "FLEET_PROBE_DIR"  # your own probe folders, separated like PATH


def probe_dirs(extra: Sequence[str | Path] = ()) -> list[Path]:
    """Folders of your own probes: `extra` (--probe-dir) first, then $FLEET_PROBE_DIR's."""
    from_env = [p for p in os.environ.get(PROBE_DIR_ENV, "").split(os.pathsep) if p]
    return [Path(p).expanduser() for p in [*extra, *from_env]]


def available_probes(extra_dirs: Sequence[str | Path] = ()) -> dict[str, ProbeSource]:
    """Every probe by name, in name order: fleet's own, then those in `probe_dirs(extra_dirs)`,
    which follow the same contract (probes/README.md) and travel in the same bundle. A probe
    whose file cannot be used is here too, with its `problem`."""
    found = dict(_own_probes())
    for folder in probe_dirs(extra_dirs):
        for name, probe in _probes_in(_readable_dir(folder), str(folder), str(folder)).items():
            if name in found:
                raise UsageError(
                    f"probe {name!r} in {folder} has the name of another probe",
                    hint="rename the file: probe names must be unique",
                )
            found[name] = probe
    return dict(sorted(found.items()))


@functools.lru_cache(maxsize=1)
def _own_probes() -> dict[str, ProbeSource]:
    """fleet's own probes, read once a process: they are the package's files, and a command
    asks for them several times (the bundle, the rules' probe names, the facts declarations)."""
    return _probes_in(probe_folder(), "fleet's probes", "probes", own=True)


def _probes_in(
    folder: Traversable, where: str, shown: str, own: bool = False
) -> dict[str, ProbeSource]:
    found: dict[str, ProbeSource] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py") and not entry.name.startswith(("_", ".")):
            name = entry.name[:-3]
            if not PROBE_NAME.match(name):
                raise UsageError(
                    f"{where}: {entry.name!r} is not a valid probe name",
                    hint="letters, digits and '_', starting with a letter",
                )
            found[name] = _read_probe(name, entry, folder, f"{shown}/{entry.name}", own)
    return found


class ProbeFileError(Exception):
    """Why a probe file cannot be used; its text starts with FILE:LINE."""


def _read_probe(
    name: str, entry: Traversable, folder: Traversable, path: str, own: bool = False
) -> ProbeSource:
    """The probe in `entry`; one that cannot be read or parsed carries its `problem`. fleet's
    `own` probes are not parsed whole here (tests/unit/test_bundle.py checks each one as a
    probe of yours is checked): parsing them all was a third of every command's start-up."""
    try:
        source = entry.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return ProbeSource(name, "", "", path=path, problem=f"{path}: cannot be read: {exc}")
    try:
        if not own:
            check_declarations(source, path)
        files = _shipped_files(source, folder, path, own)
    except ProbeFileError as exc:
        return ProbeSource(name, source, "", path=path, problem=str(exc))
    return ProbeSource(name, source, _summary(source), files, path=path)


def check_declarations(source: str, path: str) -> None:
    """ProbeFileError unless the probe parses and its SHIPS and FACTS are literals of the right
    shape, so that whatever reads them later (the bundle, the facts declarations) can."""
    try:
        assigned = _top_level_assignments(source)
    except SyntaxError as exc:
        raise ProbeFileError(f"{path}:{exc.lineno or 1}: SyntaxError: {exc.msg}") from exc
    for name in ("SHIPS", "FACTS"):
        node = assigned.get(name)
        if node is None:
            continue
        at = f"{path}:{node.lineno}: {name}"
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
            raise ProbeFileError(
                f"{at} must be a literal (fleet reads it without running the probe)"
            ) from exc
        if name == "SHIPS" and not _strings(value):
            raise ProbeFileError(f'{at} must be a tuple of file names: ("_helper.py",)')
        if name == "FACTS":
            _check_facts(value, at)
    if not _defines_collect(source):
        raise ProbeFileError(
            f"{path}:1: defines no collect(options); a probe is a module with "
            "`def collect(options):` returning its data as a dict (probes/README.md)"
        )


def _defines_collect(source: str) -> bool:
    """Whether the probe defines `collect`: a def, an assignment or an import (the host runner
    calls it; without one every host would fail with KeyError: 'collect'). Looked for at any
    depth, so a definition under `if`/`try` counts."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "collect":
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "collect" for t in node.targets
        ):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) == "collect" for a in node.names
        ):
            return True
    return False


def _check_facts(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise ProbeFileError(f'{at} must be a dict of pattern lists: {{"volatile": ["read_at"]}}')
    for key, patterns in value.items():
        if key not in FACTS_KEYS:
            raise ProbeFileError(f"{at} has {key!r}; the keys are {', '.join(FACTS_KEYS)}")
        if not _strings(patterns):
            raise ProbeFileError(f"{at}[{key!r}] must be a list of patterns (strings)")


def _strings(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _readable_dir(folder: Path) -> Path:
    if not folder.is_dir():
        raise UsageError(
            f"probe folder {folder} does not exist or is not a folder",
            hint=f"check --probe-dir and ${PROBE_DIR_ENV}",
        )
    return folder


def _shipped_files(
    source: str, folder: Traversable, path: str, own: bool = False
) -> dict[str, str]:
    """The text of each file named in the probe's `SHIPS` literal (read with `ast`, never run):
    from the probe's own folder; for fleet's `own` probes, from probes/helpers/FAMILY/."""
    files: dict[str, str] = {}
    declared = _assignment(source, "SHIPS")  # parsed once: its names and its line
    names = () if declared is None else tuple(str(n) for n in ast.literal_eval(declared))
    for name in names:
        at = f"{path}:{declared.lineno}: SHIPS names {name!r}"  # type: ignore[union-attr]
        if not name.startswith("_") or not name.endswith(".py") or "/" in name:
            raise ProbeFileError(f"{at}: ship only private files beside the probe (_name.py)")
        entry = (helper_file(name) if own else None) or folder.joinpath(name)
        try:
            files[name] = entry.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ProbeFileError(f"{at}, which cannot be read: {exc}") from exc
    return files


def declared_literal(source: str, name: str) -> Any:
    """A probe's top-level `NAME = <literal>` (SHIPS, FACTS…), read with `ast`, never run; None
    when the probe has none."""
    node = _assignment(source, name)
    return None if node is None else ast.literal_eval(node)


def _assignment(source: str, name: str) -> ast.expr | None:
    """The expression first assigned to NAME at the top level (`NAME = …`, `NAME: T = …`; None
    without one). Only that statement is parsed where it stands alone (from its line at column 0
    up to the next line that starts at column 0 with anything but a closing bracket); the whole
    file otherwise."""
    found = re.search(rf"^{name}\s*(?::[^=\n]*)?=", source, re.MULTILINE)
    if found is None:  # a top-level assignment starts at column 0
        return None
    start = source.count("\n", 0, found.start())
    lines = source.splitlines()
    end = start + 1
    while end < len(lines) and (not lines[end][:1].strip() or lines[end][:1] in ")]}#"):
        end += 1
    try:
        statement = ast.parse("\n".join(lines[start:end])).body
    except SyntaxError:
        statement = []
    if len(statement) != 1 or not isinstance(statement[0], (ast.Assign, ast.AnnAssign)):
        return _top_level_assignments(source).get(name)
    value = statement[0].value
    if value is None:
        return _top_level_assignments(source).get(name)
    ast.increment_lineno(value, start)
    return value


def facts_declaration(probe: ProbeSource) -> dict[str, list[str]]:
    """The probe's FACTS as it ships, JSON-ready (what a run records); {} when it has none."""
    raw = declared_literal(probe.source, "FACTS") if not probe.problem else None
    return {str(k): [str(p) for p in v] for k, v in (raw or {}).items()}


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
            lines = source.split(quote, 2)[1].strip().splitlines()
            return lines[0] if lines else ""
    return ""


def select_probes(
    names: Sequence[str] | None, extra_dirs: Sequence[str | Path] = ()
) -> dict[str, ProbeSource]:
    """The probes `--probes a,b` asks for (all when None). An unknown name is a UsageError (with
    the closest names), and so is a chosen probe whose file cannot be used."""
    return _chosen(names, available_probes(extra_dirs))


def _chosen(
    names: Sequence[str] | None,
    available: Mapping[str, ProbeSource],
    without: Sequence[str] = (),
) -> dict[str, ProbeSource]:
    if not names:
        chosen = {n: p for n, p in available.items() if n not in without}
    else:
        unknown = [n for n in names if n not in available]
        if unknown:
            raise unknown_probe(unknown[0], available)
        chosen = {n: available[n] for n in dict.fromkeys(names) if n not in without}
    usable = ",".join(n for n, p in chosen.items() if not p.problem)
    instead = f"or choose the probes to run: -p {usable}" if not names else "or leave it out of -p"
    refuse_broken(chosen.values(), available, instead)
    return chosen


def unknown_probe(name: str, available: Iterable[str]) -> UsageError:
    """`-p sytem`: the error, and the probes it was probably meant to be."""
    import difflib

    names = list(available)
    close = difflib.get_close_matches(name, names, n=3)
    meant = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return UsageError(
        f"unknown probe {name!r}",
        hint=f"{meant}available probes: {', '.join(names)}; your own: --probe-dir DIR "
        f"or ${PROBE_DIR_ENV}",
    )


def refuse_broken(
    needed: Iterable[ProbeSource], available: Mapping[str, ProbeSource], instead: str
) -> None:
    """A UsageError naming the first of `needed` whose file cannot be used (FILE:LINE: why); its
    hint: fix it, `instead` (how to do without it)."""
    broken = [p for p in needed if p.problem]
    if not broken:
        return
    raise UsageError(
        broken[0].problem,
        context="also: " + "; ".join(p.problem for p in broken[1:]) if broken[1:] else "",
        hint=f"fix the probe {broken[0].name!r}, {instead}",
    )


def left_out(chosen: Mapping[str, ProbeSource], available: Mapping[str, ProbeSource]) -> list[str]:
    """The problems of the probes that cannot be used and were not chosen: warnings."""
    return [
        f"{p.problem} (probe {n!r} is left out)"
        for n, p in available.items()
        if p.problem and n not in chosen
    ]


@dataclass(frozen=True)
class Bundle:
    """The code part of a script: the runner and the selected probes. Options vary per host."""

    runner: str
    probes: Mapping[str, ProbeSource]
    # the probes that cannot be used and were not chosen, one line each: warnings to show
    warnings: tuple[str, ...] = ()
    # the runner's RUNNER_MODULES, file name -> text; None: read from fleet's probes when needed
    runner_modules: Mapping[str, str] | None = None

    def runner_module_texts(self) -> dict[str, str]:
        """The text of each module the runner declares (RUNNER_MODULES), in its order."""
        if self.runner_modules is not None:
            return dict(self.runner_modules)
        return read_runner_modules(self.runner)

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256(self.runner.encode())
        for file_name, text in self.runner_module_texts().items():
            digest.update(f"\0runner/{file_name}\0".encode())
            digest.update(text.encode())
        for name, probe in self.probes.items():
            digest.update(f"\0{name}\0".encode())
            digest.update(probe.source.encode())
            for file_name, text in sorted(probe.files.items()):
                digest.update(f"\0{name}/{file_name}\0".encode())
                digest.update(text.encode())
        return digest.hexdigest()

    def facts(self) -> dict[str, dict[str, list[str]]]:
        """Each probe's FACTS declaration as shipped: a run records it (Run.facts), so a saved
        run is compared as it was, wherever its probes' files are now."""
        return {name: facts_declaration(probe) for name, probe in self.probes.items()}

    def shipped_modules(self) -> dict[str, str]:
        """Every helper file the chosen probes ship, once each (health and gpubench share
        _nvidia_smi.py): the runner makes each importable by its module name."""
        modules: dict[str, str] = {}
        shipped_by: dict[str, str] = {}
        runner_files = self.runner_module_texts()
        for name, probe in self.probes.items():
            for file_name, text in probe.files.items():
                if file_name in runner_files:
                    raise ProbeFileError(
                        f"{probe.path or name}: ships {file_name}, the name of one of the host"
                        " runner's own modules: give the helper file another name"
                    )
                if modules.setdefault(file_name, text) != text:
                    raise ProbeFileError(
                        f"{probe.path or name}: ships {file_name}, and probe"
                        f" {shipped_by[file_name]!r} ships a different {file_name}: helper"
                        " files are one module namespace on the host, so give one of them"
                        " another name"
                    )
                shipped_by.setdefault(file_name, name)
        return modules

    def script(self, options: Mapping[str, Any], deadline_s: float, parallel: int) -> bytes:
        """The whole program for one host: its start-up alarm, a literal BUNDLE, the runner."""
        payload = {
            "probes": {n: p.source for n, p in self.probes.items()},
            "runner_modules": self.runner_module_texts(),
            "options": {n: dict(options.get(n) or {}) for n in self.probes},
            "modules": self.shipped_modules(),
            "ships": {n: sorted(p.files) for n, p in self.probes.items() if p.files},
            "paths": {n: p.path for n, p in self.probes.items() if p.path},
            "deadline_s": deadline_s,
            "parallel": parallel,
        }
        # json → Python literal via json.loads: values from YAML can be dates, so normalize first.
        literal = json.dumps(json.dumps(payload, default=str))
        return with_alarm(
            f"import json\nBUNDLE = json.loads({literal})\n" + self.runner, deadline_s
        )


def build_bundle(
    probe_names: Sequence[str] | None = None,
    extra_dirs: Sequence[str | Path] = (),
    without: Sequence[str] = (),
) -> Bundle:
    """The runner and the probes `probe_names` (every one when None) but those `without`."""
    runner = runner_folder().joinpath(RUNNER_FILE).read_text(encoding="utf-8")
    available = available_probes(extra_dirs)
    probes = _chosen(probe_names, available, without)
    return Bundle(
        runner=runner,
        probes=probes,
        warnings=tuple(left_out(probes, available)),
        runner_modules=read_runner_modules(runner),
    )


def read_runner_modules(runner: str) -> dict[str, str]:
    """The text of each module the runner's `RUNNER_MODULES` literal names, from the runner's
    folder, probes/runner/ (read with `ast`, never run): they travel in every bundle, beside the
    runner."""
    folder = runner_folder()
    names = declared_literal(runner, "RUNNER_MODULES") or ()
    return {str(n): folder.joinpath(str(n)).read_text(encoding="utf-8") for n in names}
