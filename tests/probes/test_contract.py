"""Every probe file keeps the contract of probes/README.md: stdlib only at module level, Python 3.8
syntax, a `collect(options)`, and it runs by hand printing {"ok", "data", ...} as JSON."""

from __future__ import annotations

import ast
import sys

import pytest

from tests.probes.handrun import PROBES, load_probe, run_by_hand

PROBE_NAMES = sorted(p.stem for p in PROBES.glob("*.py") if not p.name.startswith("_"))
SHIPPED = [*PROBE_NAMES, "_host_runner"]


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
    tree = ast.parse((PROBES / f"{name}.py").read_text())
    foreign = module_level_imports(tree) - set(sys.stdlib_module_names) - {"__future__"}
    assert not foreign, f"{name}.py imports {foreign} at module level: import them in collect()"


@pytest.mark.parametrize("name", SHIPPED)
def test_parses_as_python_3_8(name: str) -> None:
    ast.parse((PROBES / f"{name}.py").read_text(), feature_version=(3, 8))


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_has_collect_and_a_one_line_docstring(name: str) -> None:
    module = load_probe(name)
    assert callable(module.collect)
    assert (module.__doc__ or "").strip(), f"{name}.py needs a docstring: `fleet probes` shows it"


@pytest.mark.parametrize("name", [n for n in PROBE_NAMES if n != "allreduce"])
def test_runs_by_hand_and_prints_a_result(name: str) -> None:
    result = run_by_hand(name)
    assert isinstance(result["ok"], bool)
    assert isinstance(result["data"], dict)
    assert result["ok"] or result["error"], "an absent subject says why"
