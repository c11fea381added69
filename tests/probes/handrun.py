"""Load a probe file as a module, or run it by hand as an operator would: shared by the probe tests."""

from __future__ import annotations

import ast
import importlib.abc
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


def shipped_helpers(source: str) -> list[str]:
    """The file names in a probe's `SHIPS = (...)` literal (read with ast, never run)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "SHIPS" for target in node.targets
        ):
            return [str(name) for name in ast.literal_eval(node.value)]
    return []


SHIPPED_NAMES: set[str] = set()  # module names of the helpers the loaded probes ship


class ShippedHelpers(importlib.abc.MetaPathFinder):
    """Makes the helpers a probe ships (`SHIPS`) importable by module name, from probes/, as the
    host runner does; only what is imported is loaded (a worker file shipped to run as its own
    process is never imported)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in SHIPPED_NAMES:
            return None
        return importlib.util.spec_from_file_location(fullname, PROBES / f"{fullname}.py")


def ship_helpers(probe: str) -> None:
    """Let `import _helper` in probes/PROBE.py (and in its helpers) find probes/_helper.py."""
    SHIPPED_NAMES.update(n[: -len(".py")] for n in shipped_helpers(_source(probe)))
    if not any(isinstance(finder, ShippedHelpers) for finder in sys.meta_path):
        sys.meta_path.append(ShippedHelpers())


def _source(probe: str) -> str:
    return (PROBES / f"{probe}.py").read_text()


def load_probe(name: str) -> ModuleType:
    """The probe's module, loaded from its file the way the runner sees it (not as probes.NAME),
    its shipped helpers (`SHIPS`) first."""
    ship_helpers(name)
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
