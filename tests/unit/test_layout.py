"""The layout's promises, checked on the source: which package may import what."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

FLEET = ROOT / "fleet"

# Third-party libraries that only some folders may import.
ONLY_IN = {
    "click": ("fleet/cli/",),
    "rich": ("fleet/cli/", "fleet/render/terminal/"),  # the HTML report needs no rich
    # the SSH transport, and ~/.ssh/config read by asyncssh's own parser
    "asyncssh": ("fleet/transport/ssh.py", "fleet/inventory/ssh_config_parser.py"),
}
# The flow runs top to bottom; a stage never imports a later one. The transports (and the launch
# seam, fleet/transport/launch.py) sit under everything that sends scripts: execution/, fabric/.
STAGES = [
    ("fleet.inventory", "fleet.transport"),
    ("fleet.execution", "fleet.fabric"),
    ("fleet.store",),
    ("fleet.analysis",),
    ("fleet.checks",),
    ("fleet.render",),
    ("fleet.api",),
    ("fleet.cli",),
]


def modules() -> list[Path]:
    return sorted(FLEET.rglob("*.py"))


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(
                f"{node.module}.{alias.name}" for alias in node.names
            )  # from fleet import api
    return names


def stage_of(module: str) -> int | None:
    for index, prefixes in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


@pytest.mark.parametrize("library", sorted(ONLY_IN))
def test_library_is_imported_only_where_the_layout_says(library: str) -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in modules()
        if any(n == library or n.startswith(library + ".") for n in imported(path))
        and not str(path.relative_to(ROOT)).startswith(ONLY_IN[library])
    ]
    assert offenders == []


def test_nothing_imports_back_up_the_flow() -> None:
    backwards = []
    for path in modules():
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        here = stage_of(module)
        for name in imported(path):
            there = stage_of(name)
            if here is not None and there is not None and there > here:
                backwards.append(f"{module} imports {name}")
    assert backwards == []


# Circles that remain, each with who removes it. Issue 22's CLI split takes cli/main.py apart.
KNOWN_CIRCLES = [{"fleet.cli.check", "fleet.cli.main", "fleet.cli.report"}]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """fleet module → the fleet modules it imports anywhere in its file: at the top, inside a
    function (a lazy import is still a dependency), under TYPE_CHECKING."""
    known = {module_name(path) for path in modules()}

    def as_module(name: str) -> str | None:  # `fleet.api.probe` → fleet.api
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for path in modules():
        module = module_name(path)
        found = (as_module(name) for name in imported(path))
        graph[module] = {name for name in found if name is not None and name != module}
    return graph


def folder_graph() -> dict[str, set[str]]:
    """The same, one node per folder of fleet/ (fleet.transport, fleet.execution…); a module at
    the top (fleet.api) is its own node."""

    def folder(module: str) -> str:
        parts = module.split(".")
        if len(parts) > 1 and (FLEET / parts[1]).is_dir():
            return ".".join(parts[:2])
        return module

    graph: dict[str, set[str]] = {}
    for module, names in import_graph().items():
        here = folder(module)
        graph.setdefault(here, set()).update(folder(n) for n in names if folder(n) != here)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = set()
            while True:
                other = stack.pop()
                part.add(other)
                if other == node:
                    break
            if len(part) > 1:
                found.append(part)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_circles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others() -> None:
    assert [part for part in circles(import_graph()) if part not in KNOWN_CIRCLES] == []


def test_no_folder_imports_itself_through_others() -> None:
    """transport/ and execution/ once imported each other (the launch line lived in the bundle)."""
    assert circles(folder_graph()) == []


def test_runner_means_only_the_host_runner() -> None:
    """probes/_host_runner.py is the runner; the orchestrators are the fan-out and fabric rounds."""
    named = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.ClassDef, ast.Assign, ast.AnnAssign))
        for name in _defined(node)
        if name.endswith("Runner")
    ]
    assert named == []


def _defined(node: ast.ClassDef | ast.Assign | ast.AnnAssign) -> list[str]:
    if isinstance(node, ast.ClassDef):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]
