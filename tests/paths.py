"""Where the repository's parts are, for tests and for bench/ scripts that run without pytest."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBES = ROOT / "probes"
FAKES = ROOT / "tests" / "fakes"
