"""Load a probe file as a module, or run it by hand as an operator would: shared by the probe tests."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.conftest import REMOTE_PYTHON

REPO = Path(__file__).resolve().parents[2]
PROBES = REPO / "probes"
STUBS = REPO / "tests" / "fakes" / "stubs"
BY_HAND = PROBES / "runner" / "_by_hand.py"


def helper_path(file_name: str) -> Path | None:
    """fleet's shipped helper `file_name` in its family folder (probes/helpers/FAMILY/), as the
    bundle finds it (fleet.shipped.helper_file); None when there is none."""
    return next(iter(sorted((PROBES / "helpers").glob(f"*/{file_name}"))), None)


class ProbeHelpers(importlib.abc.MetaPathFinder):
    """`import _name` in a probe finds probes/helpers/*/_name.py, as the host runner serves the helpers a
    probe ships (`SHIPS`). Only names with a leading underscore, and only after every other finder:
    probes/torch.py must never stand in for torch."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is not None or not fullname.startswith("_"):
            return None
        helper = helper_path(f"{fullname}.py")
        if helper is None:
            return None
        return importlib.util.spec_from_file_location(fullname, helper)


if not any(isinstance(finder, ProbeHelpers) for finder in sys.meta_path):
    sys.meta_path.append(ProbeHelpers())


def load_helper(name: str) -> ModuleType:
    """A helper a probe ships (`_nvidia_smi`), the module the probe's `import` gets."""
    return importlib.import_module(name)


def load_probe(name: str) -> ModuleType:
    """The probe's module, loaded from its file the way the runner sees it (not as probes.NAME);
    its shipped helpers import by their own names (ProbeHelpers)."""
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
    """`python3 probes/runner/_by_hand.py NAME ['{options}']`; returns the JSON it printed."""
    full_env = {**os.environ, **(env or {})}
    if pythonpath:
        full_env["PYTHONPATH"] = str(pythonpath)
    argv = [REMOTE_PYTHON, str(BY_HAND), name]
    argv += [json.dumps(options)] if options is not None else []
    done = subprocess.run(
        argv, capture_output=True, text=True, env=full_env, timeout=120, check=True, cwd=cwd
    )
    return dict(json.loads(done.stdout))
