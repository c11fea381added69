"""Shared fixtures: the repo root, and helpers to run fleet as a user would."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBES = ROOT / "probes"
FAKES = ROOT / "tests" / "fakes"


@pytest.fixture
def python() -> str:
    return sys.executable
