"""The CLI parses, calls the API, renders (issue 47): it builds no JSON document of its own (the
documents are made below it: fleet.api, fleet.render.documents behind the API) and it uses only
the API's published names, fleet.api.__all__ (measured when this test came: 19 names used from
outside it)."""

from __future__ import annotations

import ast
from pathlib import Path

import fleet.api
from tests.conftest import ROOT

CLI = ROOT / "fleet" / "cli"


def cli_modules() -> list[Path]:
    return sorted(CLI.rglob("*.py"))


def api_names_used(tree: ast.AST) -> set[str]:
    """`api.NAME` and names imported from fleet.api or its modules."""
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fleet.api"):
            used.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "api":
            used.add(node.attr)
    return used


def document_builders(tree: ast.AST) -> list[str]:
    """Document builders the module defines, or imports from anywhere but the API."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.endswith(
            "_document"
        ):
            found.append(f"defines {node.name}")
        elif isinstance(node, ast.ImportFrom) and not (node.module or "").startswith("fleet.api"):
            found += [f"imports {a.name}" for a in node.names if a.name.endswith("_document")]
    return found


def test_the_cli_uses_only_the_apis_published_names() -> None:
    published = set(fleet.api.__all__)
    outside = {
        f"{path.name}: {name}"
        for path in cli_modules()
        for name in api_names_used(ast.parse(path.read_text()))
        if name not in published
    }
    assert outside == set()


def test_the_cli_builds_no_document() -> None:
    built = {
        f"{path.name}: {what}"
        for path in cli_modules()
        for what in document_builders(ast.parse(path.read_text()))
    }
    assert built == set()


def test_the_checks_see_what_they_look_for() -> None:
    tree = ast.parse(
        "from fleet.api.runs import hidden\nfrom fleet.render.documents import run_document\n"
        "def check_document(): ...\napi.other\n"
    )
    assert api_names_used(tree) == {"hidden", "other"}
    assert document_builders(tree) == ["imports run_document", "defines check_document"]
