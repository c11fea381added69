"""The layout's promises, checked on the source: which package may import what."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fleet.checks as fleet_checks
from tests.conftest import ROOT

FLEET = ROOT / "fleet"

# Third-party libraries that only some folders may import.
ONLY_IN = {
    "click": ("fleet/cli/",),
    "rich": ("fleet/cli/", "fleet/render/terminal/"),  # the HTML report needs no rich
    # the SSH transport only (~/.ssh/config is read by fleet/inventory/ssh_config_parser.py)
    "asyncssh": ("fleet/transport/ssh.py",),
}
# The flow runs top to bottom; a stage never imports a later one.
STAGES = [
    ("fleet.inventory", "fleet.execution.bundle", "fleet.transport"),
    ("fleet.execution.fanout", "fleet.execution.protocol", "fleet.fabric"),
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
