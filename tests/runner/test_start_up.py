"""Python's own start-up (site, sitecustomize, .pth files) is spent from the host's deadline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runner.conftest import run_probes

SLOW = """
import time
TIMEOUT_S = 600
def collect(options):
    time.sleep(60)
"""


def test_a_slow_start_up_is_spent_from_the_deadline_not_added_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher arms the alarm before `site` runs (4 s here); the runner keeps that clock, so
    its 6 s deadline (an 11 s --timeout less the slack) fires 6 s after the start, not 4 + 6."""
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(4)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    outcome = run_probes({"slow": SLOW}, timeout_s=11.0)["local"]
    assert outcome.status == "timeout", outcome
    assert "slow" in (outcome.error or "")
    assert outcome.python  # the runner did start: its hello arrived after the slow start-up
    assert outcome.elapsed_s < 8.5, outcome.elapsed_s
