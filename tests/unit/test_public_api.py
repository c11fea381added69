"""The public API stays small and the CLI stays thin (issue 37): fleet.api.__all__ holds the
commands and their types, at most 40 names, each of which resolves; the rest is imported from
its own module. Each CLI module uses at most 6 names of fleet.api, counted on the source with ast
(`api.X`, and `from fleet.api[.module] import X`), so that conducting moves into the API."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fleet.api
from tests.conftest import ROOT

MOST_PUBLIC_NAMES = 40
MOST_API_NAMES_PER_CLI_MODULE = 6


def test_the_public_api_has_at_most_40_names_and_each_resolves() -> None:
    assert len(fleet.api.__all__) <= MOST_PUBLIC_NAMES, sorted(fleet.api.__all__)
    assert len(set(fleet.api.__all__)) == len(fleet.api.__all__)
    for name in fleet.api.__all__:
        assert getattr(fleet.api, name) is not None, name


def test_a_command_named_like_its_module_stays_the_command() -> None:
    fleet.api.JobsView  # noqa: B018  # loads fleet.api.jobs, whose name is also a command's
    assert callable(fleet.api.jobs)
    assert fleet.api.jobs.__name__ == "jobs"
    assert fleet.api.jobs.__module__ == "fleet.api.jobs"


def test_a_name_left_out_of_the_public_api_is_not_in_it() -> None:
    with pytest.raises(AttributeError, match="make_transports"):
        fleet.api.make_transports  # type: ignore[attr-defined]  # noqa: B018
    from fleet.api.probing import make_transports  # from its own module

    assert callable(make_transports)


def api_names(path: Path) -> set[str]:
    """The names of fleet.api a module uses: `api.X`, and what it imports from fleet.api.*
    (a module imported from fleet.api counts as the names used through it)."""
    names: set[str] = set()
    modules: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fleet.api"):
            for alias in (a for a in node.names if a.name != "api"):
                names.add(alias.name)
                if node.module == "fleet.api":  # a module of fleet.api, or a name of it
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id == "api" or node.value.id in modules)
        ):
            names.add(node.attr)
    return names


@pytest.mark.parametrize(
    "path", sorted((ROOT / "fleet" / "cli").glob("*.py")), ids=lambda p: p.name
)
def test_each_cli_module_uses_at_most_6_api_names(path: Path) -> None:
    used = api_names(path)
    assert len(used) <= MOST_API_NAMES_PER_CLI_MODULE, sorted(used)


def test_the_counter_counts_every_way_of_reaching_the_api(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        "from fleet import api\nfrom fleet.api.hosts import slurm_argv\n"
        "from fleet.api import runs\napi.probe\napi.probe\nruns.keep_run\n"
    )
    assert api_names(source) == {"probe", "slurm_argv", "runs", "keep_run"}
