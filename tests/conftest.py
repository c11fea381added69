"""Shared fixtures: the repo root, and helpers to run fleet as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The interpreter that plays the host's python in the probe and host-runner tests. CI sets it to a
# real Python 3.8 (the oldest a host may have): the remote code then runs under 3.8 for real.
REMOTE_PYTHON = os.environ.get("FLEET_TEST_REMOTE_PYTHON") or sys.executable


def remote_has(module: str) -> bool:
    """Whether the host's python (REMOTE_PYTHON) can import `module`."""
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([REMOTE_PYTHON, "-c", probe], check=False).returncode == 0


PROBES = ROOT / "probes"
FAKES = ROOT / "tests" / "fakes"


@pytest.fixture
def python() -> str:
    return sys.executable
