"""The layout's promises, checked on the source: which package may import what."""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

import fleet.checks as fleet_checks
from tests.conftest import ROOT

FLEET = ROOT / "fleet"

# Third-party libraries that only some folders may import (a prefix, or a glob with '*').
ONLY_IN = {
    "click": ("fleet/cli/",),
    # the HTML report needs no rich; a probe's unit draws its terminal section in terminal.py
    "rich": ("fleet/cli/", "fleet/render/terminal/", "fleet/units/*/terminal.py"),
    # the SSH transport only (~/.ssh/config is read by fleet/inventory/openssh/)
    "asyncssh": ("fleet/transport/ssh.py", "fleet/transport/asyncssh_import.py"),
}
# The flow runs top to bottom; a stage never imports a later one. The transports (and the launch
# seam, fleet/transport/launch.py) sit under everything that sends scripts: execution/, fabric/.
# Every module of fleet has a stage (test_every_fleet_module_has_a_stage): the two ground stages
# hold the declared leaves, which every stage may import.
LEAVES = (  # import no module of fleet
    "fleet.version",
    "fleet.models",
    "fleet.hostsets",
    "fleet.files",
    "fleet.collector",
    "fleet.shipped",
    "fleet.jsontext",
    "fleet.schemas",
    "fleet.registry",  # the unit table and what units declare: the seam both sides import
    "fleet.units",  # the units' package; a unit's parts take their role's stage (below)
)
FOUNDATIONS = ("fleet.errors", "fleet.exits", "fleet.redact", "fleet.yamlfile")  # on the leaves
STAGES = [
    LEAVES,
    FOUNDATIONS,
    ("fleet.inventory", "fleet.transport"),
    ("fleet.execution", "fleet.fabric"),
    ("fleet.rundoc", "fleet.store"),
    ("fleet.analysis",),
    ("fleet.checks",),
    ("fleet.findings",),
    ("fleet.render",),
    ("fleet.api",),
    ("fleet.cli",),
]
# The package's face (fleet/__init__.py hands on the API's names) and `python -m fleet`: above all.
TOP = ("fleet", "fleet.__main__")


# A probe's unit (fleet/units/PROBE/) is split by stage: each part belongs to the stage that asks
# for it (docs/layers.md); any other module of a unit is part of its analysis. The registry
# (fleet/registry/: the unit table, keyfacts.py, options.py, declared.py) sits below every stage,
# as does each unit's probe.py (its options, opt-in, topic).
UNIT_PART_STAGES = {
    "probe": "fleet.registry",  # what is declared before any host answers: below every stage
    "checks": "fleet.checks",
    "findings": "fleet.findings",
    "terminal": "fleet.render",
    "html": "fleet.render",
    "markdown": "fleet.render",
    "openmetrics": "fleet.render",
}


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
    parts = module.split(".")
    in_unit = len(parts) >= 4 and (FLEET / "units" / parts[2]).is_dir()
    if parts[:2] == ["fleet", "units"] and in_unit:  # fleet.units.PROBE.PART
        module = UNIT_PART_STAGES.get(parts[3], "fleet.analysis")
    if module in TOP:
        return len(STAGES)
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
        and not allowed(str(path.relative_to(ROOT)), ONLY_IN[library])
    ]
    assert offenders == []


def allowed(path: str, places: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(path, p) if "*" in p else path.startswith(p) for p in places)


def test_unit_parts_have_the_stage_of_their_role() -> None:
    assert stage_of("fleet.units.gpubench.facts") == stage_of("fleet.analysis.facts")
    assert stage_of("fleet.units.allreduce.matrix") == stage_of("fleet.analysis")
    assert stage_of("fleet.units.gpubench.checks") == stage_of("fleet.checks")
    assert stage_of("fleet.units.net.html") == stage_of("fleet.render")
    assert stage_of("fleet.units.gpubench.terminal") == stage_of("fleet.render")
    assert (
        stage_of("fleet.units") == stage_of("fleet.registry.keyfacts") == stage_of("fleet.models")
    )
    assert allowed("fleet/units/gpubench/terminal.py", ONLY_IN["rich"])
    assert not allowed("fleet/units/gpubench/html.py", ONLY_IN["rich"])


def test_no_unit_part_imports_a_part_of_a_later_stage() -> None:
    """A unit's facts never import its (or another unit's) checks or renderers, its checks never
    a renderer: what the generic layers get lazily from fleet.registry.part stays of their stage."""
    later = [
        f"{module_name(path)} imports {name}"
        for path in sorted((FLEET / "units").rglob("*.py"))
        for name in imported(path)
        if name.startswith("fleet.units.")
        and (stage_of(name) or 0) > (stage_of(module_name(path)) or 0)
    ]
    assert later == []


def test_the_unit_registry_imports_no_part() -> None:
    """fleet.registry is imported by every stage: it names the units' parts, it imports them only
    when a stage asks (fleet.registry.part), so importing the analysis never imports a renderer."""
    assert not [n for n in imported(FLEET / "registry" / "__init__.py") if n.startswith("fleet")]


# Who may import a unit (fleet/units/): the units themselves and the layers over them (and TOP).
ABOVE_THE_UNITS = ("fleet.units", "fleet.api", "fleet.cli")


def above_the_units(module: str) -> bool:
    return module in TOP or any(module.startswith(f"{a}.") or module == a for a in ABOVE_THE_UNITS)


def test_the_generic_layers_reach_the_units_only_through_the_registry() -> None:
    """The units stand above the layers they serve (they use the analysis', checks' and
    renderers' helpers): analysis, checks, findings, render, fabric and everything below them
    import fleet.registry, never fleet.units, and call what a unit's part declares
    (docs/layers.md). Anywhere in a module: functions and TYPE_CHECKING blocks too."""
    backwards = [
        f"{module} imports {name}"
        for module, names in import_graph().items()
        if not above_the_units(module)
        for name in names
        if name == "fleet.units" or name.startswith("fleet.units.")
    ]
    assert backwards == []


UNIT_MODULE_NAME = re.compile(r"fleet\.units(\.\w+)*")


def test_no_generic_layer_loads_a_unit_by_its_name() -> None:
    """Nor by a string handed to importlib (a lazy `_HOMES` entry, say): the registry is the one
    place a unit is loaded by name (fleet.registry.part)."""
    named = [
        f"{module} names {node.value}"
        for module, path in fleet_modules().items()
        if not above_the_units(module) and not module.startswith("fleet.registry")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and UNIT_MODULE_NAME.fullmatch(node.value)
    ]  # fmt: skip
    assert named == []


def test_every_fleet_module_has_a_stage() -> None:
    """A new top-level module must be placed: in a stage, or declared a leaf."""
    assert [name for name in fleet_modules() if stage_of(name) is None] == []


def test_the_leaves_import_no_fleet_module() -> None:
    graph = import_graph()
    leaves = {name for name in graph if stage_of(name) == 0 and not name.startswith("fleet.units")}
    outside = {
        name: {n for n in graph[name] if not n.startswith("fleet.registry")} for name in leaves
    }
    assert {f"{name} imports {found}" for name, found in outside.items() if found} == set()


def test_nothing_imports_back_up_the_flow() -> None:
    backwards = [
        f"{module} imports {name}"
        for module, names in import_graph().items()
        for name in names
        if (stage_of(name) or 0) > (stage_of(module) or 0)
    ]
    assert backwards == []


def test_the_rule_engine_is_used_through_fleet_checks() -> None:
    """fleet.checks' modules are its inside: the rest of fleet, the tests and bench/ import the
    names fleet/checks/__init__.py exports."""
    inside = [
        f"{path.relative_to(ROOT)} imports {name}"
        for folder in ("fleet", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not path.is_relative_to(FLEET / "checks")
        for name in imported(path)
        if name.startswith("fleet.checks.") and name.split(".")[2] not in fleet_checks.__all__
    ]
    assert inside == []


# ------------------------------------------------ the CLI one floor over the API (issue 22)

# What fleet/cli/ may import of fleet: the API, the errors, the models, the JSON text writer, the
# renderers (a unit's terminal part among them: is_unit_renderer), itself; and the collector, whose pause over the executable's start-up the CLI ends
# (fleet/__main__.py).
CLI_MAY_IMPORT = (
    "fleet.api",
    "fleet.collector",
    "fleet.errors",
    "fleet.exits",
    "fleet.models",
    "fleet.jsontext",
    "fleet.render",
    "fleet.cli",
)
MAX_MODULE_LINES = 600
# Known exceptions that other branches of issue 22 remove; an entry that is no longer true fails
# its test, so the list is emptied as they land.
CIRCLES_ON_OTHER_BRANCHES: set[frozenset[str]] = set()
LONG_ON_OTHER_BRANCHES: set[str] = set()


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def fleet_modules() -> dict[str, Path]:
    return {module_name(path): path for path in modules()}


def imported_modules(path: Path, known: Collection[str]) -> set[str]:
    """The fleet modules `path` imports, anywhere in it (functions and TYPE_CHECKING blocks too):
    `from fleet import api` is fleet.api, `from fleet.exits import with_bits` is
    fleet.exits, `from fleet import __version__` is the package fleet itself."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in known:
                    found.add(submodule)
                elif node.module in known:
                    found.add(node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    known = fleet_modules()
    return {name: imported_modules(path, known) - {name} for name, path in known.items()}


def reachable(graph: Mapping[str, Collection[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def import_circles(graph: Mapping[str, Collection[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module: the modules each module
    reaches and is reached by (fleet's few hundred modules make the plain way fast enough)."""
    reach = {node: reachable(graph, node) for node in graph}
    circles = set()
    for node in graph:
        both = {other for other in reach[node] if other != node and node in reach.get(other, ())}
        if both:
            circles.add(frozenset({node, *both}))
    return circles


def test_import_circles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": {"e"}, "f": set()}
    assert import_circles(graph) == {frozenset("abc"), frozenset({"e", "e2"})}


def test_cli_imports_only_the_api_errors_models_render_and_itself() -> None:
    known = fleet_modules()
    below = {
        f"{name} imports {module}"
        for name, path in known.items()
        if name.startswith("fleet.cli")
        for module in imported_modules(path, known)
        if not module.startswith(CLI_MAY_IMPORT) and not is_unit_renderer(module)
    }
    assert below == set()


def is_unit_renderer(module: str) -> bool:
    """A unit's terminal part is a renderer too (`fleet jobs` prints the live unit's report)."""
    return module.startswith("fleet.units.") and module.endswith(".terminal")


def test_no_import_circle_anywhere_in_fleet() -> None:
    circles = import_circles(import_graph())
    assert circles - CIRCLES_ON_OTHER_BRANCHES == set()
    assert CIRCLES_ON_OTHER_BRANCHES - circles == set(), "gone: remove it from the list"


def test_no_fleet_module_over_600_lines() -> None:
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in modules()}
    long = {path for path, count in lines.items() if count > MAX_MODULE_LINES}
    assert long - LONG_ON_OTHER_BRANCHES == set()
    assert LONG_ON_OTHER_BRANCHES - long == set(), "split: remove it from the list"


def test_runner_names_only_the_host_runner() -> None:
    """ "Runner" means the host runner (probes/runner/_host_runner.py) and nothing else."""
    runners = [
        f"{path.relative_to(ROOT)}: {node.name}"
        for path in [*modules(), *sorted((ROOT / "probes").rglob("*.py"))]
        if path != ROOT / "probes" / "runner" / "_host_runner.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Runner")
    ]
    assert runners == []
