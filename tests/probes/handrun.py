"""Load a probe file as a module, or run it by hand as an operator would: shared by the probe tests."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.conftest import REMOTE_PYTHON

REPO = Path(__file__).resolve().parents[2]
PROBES = REPO / "probes"
STUBS = REPO / "tests" / "fakes" / "stubs"


def load_probe(name: str) -> ModuleType:
    """The probe's module, loaded from its file the way the runner sees it (not as probes.NAME):
    its shipped helpers (`import _name`) importable by name, from probes/ (appended to sys.path,
    so that probes/torch.py never hides torch)."""
    if str(PROBES) not in sys.path:
        sys.path.append(str(PROBES))
    spec = importlib.util.spec_from_file_location(f"fleet_probe_{name}", PROBES / f"{name}.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_by_hand(
    name: str,
    options: Any = None,
    pythonpath: Any = None,
    cwd: Any = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`python3 probes/NAME.py ['{options}']`; returns the JSON it printed."""
    full_env = {**os.environ, **(env or {})}
    if pythonpath:
        full_env["PYTHONPATH"] = str(pythonpath)
    argv = [REMOTE_PYTHON, str(PROBES / f"{name}.py")]
    argv += [json.dumps(options)] if options is not None else []
    done = subprocess.run(
        argv, capture_output=True, text=True, env=full_env, timeout=120, check=True, cwd=cwd
    )
    return dict(json.loads(done.stdout))


def helpers_imported(name: str) -> set[str]:
    """The shipped helper files (`_x.py`) probe `name` imports, directly or through its helpers:
    what its SHIPS must list for the host to import them."""
    found: set[str] = set()
    pending = [PROBES / f"{name}.py"]
    while pending:
        tree = ast.parse(pending.pop().read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for module in names:
                file_name = f"{module}.py"
                if module.startswith("_") and file_name not in found:
                    found.add(file_name)
                    pending.append(PROBES / file_name)
    return found
