"""The bench/ scripts run without pytest (issue 46, item 8: the README's mixed-fleet figure,
`python3 bench/mixed_fleet.py`, needed pytest to reproduce): each script is loaded, not run, in
a Python where `import pytest` fails, so every test helper it uses is plain Python
(tests/paths.py, tests/integration/fleet_runs.py, …)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import ROOT

LOAD = """
import runpy, sys
sys.modules["pytest"] = None  # import pytest fails, as where it is not installed
sys.path.insert(0, sys.argv[2])
runpy.run_path(sys.argv[1], run_name="loaded_not_run")
"""
SCRIPTS = sorted(path.name for path in (ROOT / "bench").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bench_script_loads_without_pytest(script: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(ROOT / "bench" / script), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
