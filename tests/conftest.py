"""Shared fixtures: the repo root, and helpers to run fleet as a user would."""

from __future__ import annotations

import ast
import functools
import inspect
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.paths import FAKES, PROBES, ROOT

# The interpreter that plays the host's python in the probe and host-runner tests. CI sets it to a
# real Python 3.8 (the oldest a host may have): the remote code then runs under 3.8 for real.
REMOTE_PYTHON = os.environ.get("FLEET_TEST_REMOTE_PYTHON") or sys.executable


def remote_has(module: str) -> bool:
    """Whether the host's python (REMOTE_PYTHON) can import `module`."""
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([REMOTE_PYTHON, "-c", probe], check=False).returncode == 0


__all__ = ["FAKES", "PROBES", "REMOTE_PYTHON", "ROOT", "remote_has"]


@pytest.fixture
def python() -> str:
    return sys.executable


# ------------------------------------------------------------------ the torch marker
# `-m "not torch"` (the 3.8 job in .ci/run) must leave out every test that needs a real torch. A
# test needs it when it, or a fixture it uses, imports torch or calls pytest.importorskip("torch…").
# Such a test must say so with @pytest.mark.torch (on the test or its module's pytestmark); the
# collection stops with a usage error naming each test that does not.


def _imports_torch(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "torch" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return not node.level and (node.module or "").split(".")[0] == "torch"
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        called = node.func.attr if isinstance(node.func, ast.Attribute) else None
        called = node.func.id if isinstance(node.func, ast.Name) else called
        return called == "importorskip" and str(node.args[0].value).split(".")[0] == "torch"
    return False


@functools.cache  # parametrized tests share one function
def needs_torch(function: Callable[..., Any]) -> bool:
    """Whether a test or fixture function's own code imports torch or skips without it."""
    target = inspect.unwrap(function)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(target)))
    except (OSError, TypeError):
        return False
    except SyntaxError:  # Python 3.9's getsource stops inside a decorator that holds a lambda
        tree = _function_in_its_module(target)
    return any(_imports_torch(node) for node in ast.walk(tree))


def _function_in_its_module(function: Callable[..., Any]) -> ast.AST:
    """`function`'s own node, found in its whole module by name and first line."""
    module = ast.parse(Path(inspect.getsourcefile(function) or "").read_text())
    first = function.__code__.co_firstlineno
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == (
            function.__name__
        ):
            starts = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if starts == first:
                return node
    return ast.Module(body=[], type_ignores=[])


def torch_users(item: pytest.Item) -> list[str]:
    """The test and the fixtures of `item` (by name) whose code needs torch."""
    users = ["the test"] if isinstance(item, pytest.Function) and needs_torch(item.obj) else []
    fixture_defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name in getattr(item, "fixturenames", ()):
        defs = fixture_defs.get(name, ())
        if defs and needs_torch(defs[-1].func):
            users.append(f"fixture {name!r}")
    return users


def unmarked_torch_tests(items: Iterable[pytest.Item]) -> list[str]:
    """`nodeid (what needs torch)` for each item that needs torch but is not marked torch."""
    return [
        f"{item.nodeid} ({', '.join(users)})"
        for item in items
        if item.get_closest_marker("torch") is None and (users := torch_users(item))
    ]


@pytest.hookimpl(tryfirst=True)  # before -m deselects anything
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unmarked = unmarked_torch_tests(items)
    if unmarked:
        raise pytest.UsageError(
            "these tests need torch but are not marked @pytest.mark.torch:\n  "
            + "\n  ".join(unmarked)
        )
