"""The test suite's own layout: test modules share helpers through helper modules, never through
each other; every test that needs torch carries the `torch` marker (.ci/run's 3.8 job runs
`-m "not torch"`); and fleet/ never imports torch (what mypy's optional torch relies on)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT

TESTS = ROOT / "tests"
MODULES = sorted(p for p in TESTS.rglob("*.py") if "golden" not in p.parts)


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def imported_modules(source: str, module: str) -> set[str]:
    """Every module that `source` (the text of `module`) imports, as an absolute name;
    `from X import Y` counts as X and X.Y (Y may be a module)."""
    package = module.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def imports_of(path: Path) -> set[str]:
    return imported_modules(path.read_text(encoding="utf-8"), module_name(path))


def is_test_module(name: str) -> bool:
    return name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")


def test_the_scan_sees_the_suite() -> None:
    assert len([p for p in MODULES if p.name.startswith("test_")]) > 50
    assert "tests.recorded" in imports_of(TESTS / "unit" / "test_checks.py")


def test_no_module_of_the_suite_imports_a_test_module() -> None:
    """Shared helpers live in helper modules (tests/helpers.py, tests/recorded.py,
    tests/<dir>/helpers.py, conftest.py): importing a test module runs its module-level code and
    makes pytest's view of where a test lives disagree with the import system's."""
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in MODULES
        for name in sorted(imports_of(path))
        if is_test_module(name)
    ]
    assert found == []


@pytest.mark.parametrize(
    "line",
    [
        "from tests.unit.test_checks import data",
        "from tests.unit import test_checks",
        "import tests.unit.test_checks",
        "from .test_checks import data",
        "from . import test_checks",
        "from ..unit.test_checks import data",
    ],
)
def test_the_import_scan_catches_absolute_and_relative_imports(line: str) -> None:
    found = {n for n in imported_modules(line, "tests.unit.test_x") if is_test_module(n)}
    assert "tests.unit.test_checks" in found


def test_helpers_are_not_test_modules() -> None:
    found = imported_modules("from tests.unit.helpers import host", "tests.unit.test_x")
    assert not [n for n in found if is_test_module(n)]


def test_fleet_never_imports_torch() -> None:
    """pyproject.toml lets mypy take a missing torch as Any (the probes import it optionally); that
    stays harmless only while the controller (fleet/) never imports torch itself."""
    fleet = sorted((ROOT / "fleet").rglob("*.py"))
    assert fleet
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in fleet
        for name in sorted(imports_of(path))
        if name.split(".")[0] == "torch"
    ]
    assert found == []
    assert "torch" in imported_modules("def collect(options):\n    import torch\n", "probes.x")


# ------------------------------------------------------------------ the torch marker
SUITE_INI = """[pytest]
markers =
    torch: needs a real torch install
"""
SUITE_CONFTEST = """
import pytest
from tests.conftest import pytest_collection_modifyitems  # the check under test

@pytest.fixture
def gloo():
    torch = pytest.importorskip("torch")
    return torch

@pytest.fixture
def uses_gloo(gloo):
    return gloo
"""
MARKED = """
import pytest

@pytest.mark.torch
def test_imports_it():
    import torch.distributed

@pytest.mark.torch
def test_skips_without_it():
    pytest.importorskip("torch.distributed._symmetric_memory")

@pytest.mark.torch
def test_through_a_fixture(uses_gloo):
    pass

def test_without_torch(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
"""


def collect(tmp_path: Path, tests: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`pytest --collect-only` over a one-file suite that uses the suite's torch-marker check."""
    (tmp_path / "pytest.ini").write_text(SUITE_INI)
    (tmp_path / "conftest.py").write_text(SUITE_CONFTEST)
    (tmp_path / "test_suite.py").write_text(textwrap.dedent(tests))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_marked_torch_tests_collect_and_not_torch_leaves_only_the_rest(tmp_path: Path) -> None:
    done = collect(tmp_path, MARKED, "-m", "not torch")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "test_suite.py::test_without_torch"
    assert "1/4 tests collected (3 deselected)" in done.stdout


@pytest.mark.parametrize(
    ("body", "user"),
    [
        ("def test_x():\n    import torch\n", "the test"),
        ("def test_x():\n    from torch import distributed\n", "the test"),
        ("def test_x():\n    torch = pytest.importorskip('torch')\n", "the test"),
        ("def test_x(uses_gloo):\n    pass\n", "fixture 'gloo'"),
    ],
)
def test_an_unmarked_torch_test_stops_the_collection_naming_it(
    tmp_path: Path, body: str, user: str
) -> None:
    done = collect(tmp_path, "import pytest\n\n" + body, "-m", "not torch")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "need torch but are not marked @pytest.mark.torch" in done.stderr
    assert f"test_suite.py::test_x ({user})" in done.stderr
