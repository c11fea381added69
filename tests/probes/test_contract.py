"""Every probe file keeps the contract of probes/README.md: stdlib only at module level, Python 3.8
syntax, a `collect(options)`, and it runs by hand printing {"ok", "data", ...} as JSON. The files a
host runs that are not probes (the host runner, the allreduce worker, the fabric rank) are stdlib
only at module level too, and load under a real Python 3.8."""

from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fleet.execution.bundle import declared_literal
from tests.conftest import REMOTE_PYTHON
from tests.probes.handrun import PROBES, load_probe, run_by_hand

PROBE_NAMES = sorted(p.stem for p in PROBES.glob("*.py") if not p.name.startswith("_"))
# Every file that runs on a host by its module name: the probes at the top of probes/, the runner
# in runner/, the fabric rank in fabric/, the shipped helpers in helpers/FAMILY/. The bundle ships
# them flat, so each name is unique (test_every_host_file_name_is_unique).
HOST_PATHS = {p.stem: p for p in sorted(PROBES.rglob("*.py")) if p.name != "__init__.py"}
# Run on hosts but not probes: the allreduce worker (`python -c <its text>`, one per rank), the
# gpubench worker (one per GPU and one for the pairs) and the fabric rank (sent by
# fleet/fabric/launch.py). Only a host's python ever runs them.
HOST_FILES = ["_allreduce_worker", "_fabric_rank", "_gpubench_worker"]
# The host runner and the modules it declares (RUNNER_MODULES), shipped in every bundle.
RUNNER = [
    "_host_runner",
    *(
        name.removesuffix(".py")
        for name in declared_literal(HOST_PATHS["_host_runner"].read_text(), "RUNNER_MODULES")
    ),
]
# Helpers that probes ship (`SHIPS`) and import by module name (`import _pcie`): the runner serves
# them on the host, so a probe may import them at module level.
HELPERS = sorted(
    p.stem for p in PROBES.glob("helpers/*/_*.py") if p.stem not in (*RUNNER, *HOST_FILES)
)
SHIPPED = [*PROBE_NAMES, *RUNNER, *HOST_FILES, *HELPERS]


def module_level_imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("name", SHIPPED)
def test_ships_only_stdlib_imports_at_module_level(name: str) -> None:
    tree = ast.parse(HOST_PATHS[name].read_text())
    foreign = module_level_imports(tree) - set(sys.stdlib_module_names) - {"__future__", *HELPERS}
    assert not foreign, f"{name}.py imports {foreign} at module level: import them in collect()"


def helpers_needed(name: str) -> set[str]:
    """The helper files a probe imports, and those its helpers import, and so on."""
    needed: set[str] = set()
    todo = [name]
    while todo:
        tree = ast.parse(HOST_PATHS[todo.pop()].read_text())
        for helper in module_level_imports(tree) & set(HELPERS):
            if f"{helper}.py" not in needed:
                needed.add(f"{helper}.py")
                todo.append(helper)
    return needed


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_ships_every_helper_it_imports(name: str) -> None:
    """On a host only the files in SHIPS can be imported: a helper a helper imports too."""
    tree = ast.parse(HOST_PATHS[name].read_text())
    ships = next(
        (
            ast.literal_eval(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "SHIPS" for t in node.targets)
        ),
        (),
    )
    assert helpers_needed(name) <= set(ships), f"{name}.py: SHIPS lacks a helper it imports"


@pytest.mark.parametrize("name", SHIPPED)
def test_parses_as_python_3_8(name: str) -> None:
    ast.parse(HOST_PATHS[name].read_text(), feature_version=(3, 8))


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_has_collect_and_a_one_line_docstring(name: str) -> None:
    module = load_probe(name)
    assert callable(module.collect)
    assert (module.__doc__ or "").strip(), f"{name}.py needs a docstring: `fleet probes` shows it"


@pytest.mark.parametrize("name", [n for n in PROBE_NAMES if n not in ("allreduce", "gpubench")])
def test_runs_by_hand_and_prints_a_result(name: str) -> None:
    result = run_by_hand(name)
    assert isinstance(result["ok"], bool)
    assert isinstance(result["data"], dict)
    assert result["ok"] or result["error"], "an absent subject says why"


# ------------------------------------------------------------------ under a real Python 3.8
# ast's feature_version checks the grammar only; a real 3.8 also runs the module body, where a
# `dict[str, Any]` alias or a 3.9+ call at module level fails (TypeError, AttributeError).
# The file's folder is importable, as the runner makes a probe's shipped helpers importable.
# A host file loaded as the host loads it: its helpers (probes/helpers/*/) importable by name.
LOAD = (
    "import glob, os, runpy, sys; sys.path.append(os.path.dirname(sys.argv[1])); "
    "sys.path += sorted(glob.glob(os.path.join(sys.argv[2], 'helpers', '*'))); "
    "runpy.run_path(sys.argv[1], run_name='fleet_host_file')"
)


def is_python_3_8(python: str) -> bool:
    done = subprocess.run(
        [python, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 8))"], check=False
    )
    return done.returncode == 0


def python_3_8() -> str | None:
    """A real Python 3.8: the host python (the 3.8 job in .ci/run sets it), else pyenv's."""
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = [REMOTE_PYTHON, *sorted(glob.glob(f"{pyenv}/versions/3.8.*/bin/python3.8"))]
    return next((c for c in candidates if is_python_3_8(c)), None)


PYTHON_3_8 = python_3_8()
needs_python_3_8 = pytest.mark.skipif(
    PYTHON_3_8 is None, reason="no Python 3.8 here (pyenv install 3.8): only the grammar checked"
)


def problems_under_3_8(path: Path, python: str | None) -> list[str]:
    """What keeps `path` from loading on a Python 3.8 host: its grammar (always), then compiling
    and running its module body (not as __main__) under `python`, a real 3.8, when there is one."""
    source = path.read_text(encoding="utf-8")
    try:
        ast.parse(source, str(path), feature_version=(3, 8))
    except SyntaxError as exc:
        return [f"not Python 3.8 syntax: {exc}"]
    if python is None:
        return []
    done = subprocess.run(
        [python, "-I", "-c", LOAD, str(path), str(PROBES)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [f"{python}: {done.stderr.strip()}"] if done.returncode else []


@needs_python_3_8
@pytest.mark.parametrize("name", [*HOST_FILES, *RUNNER])
def test_loads_under_a_real_python_3_8(name: str) -> None:
    assert problems_under_3_8(HOST_PATHS[name], PYTHON_3_8) == []


def break_syntax(source: str) -> str:
    return source.replace("def graph_plan(", "def graph_plan((", 1)


def use_3_10_syntax(source: str) -> str:
    return (
        source + "\n\ndef by_mode(mode):\n    match mode:\n        case _:\n            return 0\n"
    )


def use_3_9_at_run_time(source: str) -> str:
    return source.replace("Record = Dict[str, Any]", "Record = dict[str, Any]", 1)


@pytest.mark.parametrize(
    ("breakage", "grammar"),
    [(break_syntax, True), (use_3_10_syntax, True), (use_3_9_at_run_time, False)],
)
def test_the_3_8_check_fails_on_a_broken_copy_of_the_worker(
    tmp_path: Path, breakage: Callable[[str], str], grammar: bool
) -> None:
    """The check above can fail: each broken copy of the worker is caught, by the grammar or (a
    3.9+ construct that parses) only by running it under a real 3.8; the intact copy passes."""
    source = HOST_PATHS["_allreduce_worker"].read_text(encoding="utf-8")
    intact, broken = tmp_path / "intact" / "_allreduce_worker.py", tmp_path / "_allreduce_worker.py"
    intact.parent.mkdir()
    intact.write_text(source)
    broken.write_text(breakage(source))
    assert broken.read_text() != source, "the breakage no longer applies to the worker"
    if not grammar and PYTHON_3_8 is None:
        pytest.skip("only a real Python 3.8 catches this one")
    assert problems_under_3_8(intact, PYTHON_3_8) == []
    assert problems_under_3_8(broken, PYTHON_3_8) != []
    assert (problems_under_3_8(broken, None) != []) is grammar


def test_every_host_file_name_is_unique() -> None:
    """The bundle ships fleet's host files flat (a helper is `import _name` on the host, wherever
    it sits in probes/): two files of one name would be one module there."""
    names = [p.name for p in PROBES.rglob("*.py") if p.name != "__init__.py"]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
    assert len(HOST_PATHS) == len(names)


def test_the_probes_folder_has_its_parts_in_their_folders() -> None:
    """The probes at the top; the runner, the fabric rank and the helpers in folders of their own
    (probes/README.md), none of them a package: their modules are shipped, not imported."""
    top = sorted(p.name for p in PROBES.glob("_*.py") if p.name != "__init__.py")
    assert top == []
    assert {p.parent.relative_to(PROBES).as_posix() for p in PROBES.glob("*/**/_*.py")} <= {
        "runner",
        "fabric",
        *(f"helpers/{family.name}" for family in (PROBES / "helpers").iterdir()),
    }
    assert not [p for p in PROBES.glob("*/**/__init__.py")]
