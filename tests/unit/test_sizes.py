"""The size limits of docs/layers.md, measured with `ast` on fleet/ and probes/: a function at
most 50 lines, a class at most 250, a module at most 600, a folder at most 15 modules. ruff's
C901 (branches) and PLR0915 (statements) guard the rest (pyproject.toml)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT

PLACES = ("fleet", "probes")
MAX_FUNCTION_LINES = 50
MAX_CLASS_LINES = 250
MAX_MODULE_LINES = 600
MAX_FOLDER_MODULES = 15


def python_files() -> list[Path]:
    return sorted(path for place in PLACES for path in (ROOT / place).rglob("*.py"))


def where(path: Path, node: ast.AST | None = None) -> str:
    line = f":{node.lineno}" if isinstance(node, ast.stmt) else ""
    return f"{path.relative_to(ROOT)}{line}"


def spans(kinds: tuple[type[ast.stmt], ...]) -> dict[str, int]:
    """The lines of every definition of `kinds`, from its `def`/`class` line to its last (a
    click command's stack of option decorators is its declaration, not its body)."""
    found: dict[str, int] = {}
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, kinds):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                found[f"{where(path, node)} {getattr(node, 'name', '')}"] = lines
    return found


def over(sizes: dict[str, int], limit: int) -> dict[str, int]:
    return {name: size for name, size in sizes.items() if size > limit}


def test_no_function_over_50_lines() -> None:
    assert over(spans((ast.FunctionDef, ast.AsyncFunctionDef)), MAX_FUNCTION_LINES) == {}


def test_no_class_over_250_lines() -> None:
    assert over(spans((ast.ClassDef,)), MAX_CLASS_LINES) == {}


def test_no_module_over_600_lines() -> None:
    lines = {where(p): len(p.read_text(encoding="utf-8").splitlines()) for p in python_files()}
    assert over(lines, MAX_MODULE_LINES) == {}


def test_no_folder_over_15_modules() -> None:
    modules = Counter(str(path.parent.relative_to(ROOT)) for path in python_files())
    assert over(dict(modules), MAX_FOLDER_MODULES) == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    pass\n", {"f": 2}),
        ("@decorate\ndef f():\n    '''doc'''\n    return 1\n", {"f": 3}),
        ("class C:\n    def m(self):\n        pass\n", {"C": 3, "m": 2}),
    ],
)
def test_a_definition_is_measured_from_its_def_line_to_its_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, expected: dict[str, int]
) -> None:
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "m.py").write_text(source)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    measured = spans((ast.FunctionDef, ast.ClassDef))
    assert {name.split()[-1]: size for name, size in measured.items()} == expected
