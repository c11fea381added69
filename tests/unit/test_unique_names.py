"""One word, one meaning (issue 47): a public function or class name is defined by one module of
fleet/ only, so that a name found in the code means one thing (measured when this test came: 33
names defined twice or more, among them collection_paused, write_run_json and load_run).
Three kinds of sameness are meant and allowed, each said below."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import ROOT

FLEET = ROOT / "fleet"

# The unit parts' protocol (docs/layers.md): each unit's part answers to the same names, which
# the generic layer that asks for the part calls (fleet.analysis.facts.measurements gathers them,
# fleet.analysis.baselines.identity.host_versions and gpu_identity too).
PART_PROTOCOL = frozenset(
    {"add_helpers", "run_context", "view", "shown", "body", "lines", "measurements", "families",
     "findings", "checked_view", "host_versions", "gpu_identity"}
)  # fmt: skip
# fleet.api publishes a lower layer's function under its own name, with its defaults filled in
# (the runs folder, the packs folder): one meaning, said at the API and below it.
API_WRAPPERS = frozenset(
    {"save_run", "resolve_run", "list_runs", "prune_runs", "available_packs", "packs_folder",
     "evaluate", "parse_pairs", "parse_sizes"}
)  # fmt: skip

# `main`, a program's entry point by convention: `python -m fleet` and the console script
# (fleet/__main__.py) start the CLI's root group (fleet/cli/root.py), each named so.
CONVENTIONS = frozenset({"main"})


def public_definitions() -> dict[str, list[str]]:
    """Name → the modules of fleet/ defining it at top level (functions and classes)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(FLEET.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            defines = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if defines and not node.name.startswith("_"):
                found[node.name].append(str(path.relative_to(ROOT)))
    return found


def in_a_unit(module: str) -> bool:
    return Path(module).parts[:2] == ("fleet", "units") and len(Path(module).parts) == 4


def clashes(found: dict[str, list[str]]) -> dict[str, list[str]]:
    twice = {}
    for name, modules in found.items():
        if name in PART_PROTOCOL:
            modules = [m for m in modules if not in_a_unit(m)]
        if len(modules) > 1 and name not in API_WRAPPERS | CONVENTIONS:
            twice[name] = modules
    return twice


def test_every_public_name_is_defined_once() -> None:
    assert clashes(public_definitions()) == {}


def test_every_allowance_is_still_needed() -> None:
    found = public_definitions()
    assert [n for n in API_WRAPPERS if len(found.get(n, [])) < 2] == []
    assert [n for n in API_WRAPPERS if not any(m.startswith("fleet/api/") for m in found[n])] == []


def test_a_clash_is_seen() -> None:
    found = {"load_run": ["fleet/api/runs.py", "fleet/cli/options.py"],
             "view": ["fleet/units/gpu/terminal.py", "fleet/units/net/terminal.py"]}  # fmt: skip
    assert clashes(found) == {"load_run": ["fleet/api/runs.py", "fleet/cli/options.py"]}
