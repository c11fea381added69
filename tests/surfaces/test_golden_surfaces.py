"""Every surface of the golden runs, byte for byte: terminal (80 columns), JSON, Markdown, check
verdicts, JUnit and HTML of recorded real runs, compared with what fleet printed when these files
were made. A change of output is a decision: regenerate with `FLEET_REGOLD=1 pytest
tests/surfaces` and let the diff of tests/surfaces/golden/ show what changed (issue 37: the
structure moves code, not bytes)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.cli.inprocess import REAL_RUN_DIR, invoke
from tests.conftest import ROOT

GOLDEN = Path(__file__).parent / "golden"
RUNS = {
    "h200x2": REAL_RUN_DIR / "h200x2_run.json",
    "mixed8": REAL_RUN_DIR / "mixed8_loopback.json",
    "gpuless": REAL_RUN_DIR / "gpuless_local.json",
    "health1": REAL_RUN_DIR / "h200x1_health_run.json",
    "gpubench1": REAL_RUN_DIR / "h200x1_gpubench_run.json",
    "loopback8": REAL_RUN_DIR / "loopback8_two_odd.json",
    "torch_missing": REAL_RUN_DIR / "local2_torch_missing.json",
}
# surface -> the fleet arguments after the run file's place is filled ({run}, {out})
SURFACES = {
    "show.txt": ["show", "{run}"],
    "show.json": ["show", "{run}", "--json", "-"],
    "show.md": ["show", "{run}", "--format", "markdown"],
    "check.txt": ["check", "--run", "{run}"],
    "check.json": ["check", "--run", "{run}", "--json", "-"],
    "check.junit.xml": ["check", "--run", "{run}", "--junit", "{out}"],
    "report.html": ["report", "{run}", "-o", "{out}"],
}
CASES = [(run, surface) for run in RUNS for surface in SURFACES]


def render(tmp_path: Path, run: str, surface: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The surface of `run`, the run read as `run.json` in the current folder and written to
    `out` there: a path as long on every machine and checkout (a long one would wrap lines)."""
    shutil.copyfile(RUNS[run], tmp_path / "run.json")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    args = [a.format(run="run.json", out="out") for a in SURFACES[surface]]
    result = invoke(tmp_path, *args, columns=80)
    text = out.read_text() if "{out}" in SURFACES[surface] else result.output
    if "--json" in args:  # the document alone on stdout; the terminal's report goes to stderr
        text = result.stdout
    text = f"exit {result.exit_code}\n" + text
    return normalise(text, tmp_path)


def normalise(text: str, tmp_path: Path) -> str:
    """What differs between two renderings of one run by nature: where it was written."""
    text = text.replace(str(tmp_path), "TMP").replace(str(REAL_RUN_DIR), "RUNS")
    # the checkout's own folder in the pack's path (not in the recorded runs' data, which keep
    # the folder they were recorded in)
    text = text.replace(str(ROOT / "fleet"), "ROOT/fleet")
    text = re.sub(r"page written \d{4}-\d\d-\d\dT[\d:]+Z", "page written TIME", text)
    return re.sub(r"fleet \d+\.\d+\.\d+[^\s<\"]*", "fleet VERSION", text)


@pytest.mark.parametrize(("run", "surface"), CASES, ids=[f"{r}-{s}" for r, s in CASES])
def test_a_golden_run_renders_as_recorded(
    tmp_path: Path, run: str, surface: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    golden = GOLDEN / run / surface
    rendered = render(tmp_path, run, surface, monkeypatch)
    if os.environ.get("FLEET_REGOLD"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(rendered)
    assert rendered == golden.read_text()
