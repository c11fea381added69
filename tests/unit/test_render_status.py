"""The status table at fleet scale: hosts that ended alike share a row, trouble stays visible."""

from __future__ import annotations

import dataclasses
import io
import json

from rich.console import Console

from fleet.models import HostOutcome, Run
from fleet.render.terminal import MAX_STATUS_ROWS, status_table
from tests.conftest import ROOT

RECORDED = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"
REFUSED = "connection refused by 10.0.0.1:22"


def rendered(outcomes: list[HostOutcome]) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(status_table(outcomes))
    return console.file.getvalue()  # type: ignore[attr-defined]


def recorded_fleet(size: int) -> list[HostOutcome]:
    """`size` hosts gpu-001…: copies of one real host's outcome; gpu-007 and gpu-042 refused."""
    run = Run.from_dict(json.loads(RECORDED.read_text()))
    template = next(o for o in run.hosts.values() if o.status == "ok")
    outcomes = []
    for index in range(1, size + 1):
        outcome = dataclasses.replace(template, name=f"gpu-{index:03d}", elapsed_s=1.0 + index / 100)
        if index in (7, 42):
            outcome = HostOutcome(outcome.name, "unreachable", "10.0.0.1", REFUSED, "check sshd")
        outcomes.append(outcome)
    return outcomes


def test_a_small_fleet_gets_one_row_per_host() -> None:
    text = rendered(recorded_fleet(MAX_STATUS_ROWS))
    assert all(f"gpu-{i:03d}" in text for i in range(1, MAX_STATUS_ROWS + 1))
    assert "hosts)" not in text


def test_a_big_fleet_folds_hosts_that_ended_alike_trouble_first() -> None:
    outcomes = recorded_fleet(1000)
    text = rendered(outcomes)
    rows = [line for line in text.splitlines() if "gpu-" in line]
    assert len(rows) == 2, text
    trouble, fine = rows
    assert "gpu-[007,042] (2 hosts)" in trouble and "unreachable" in trouble and REFUSED in trouble
    assert "gpu-[001-006,008-041,043-1000] (998 hosts)" in fine and " ok " in fine
    probes = len(outcomes[0].probes)
    assert f"{probes}/{probes}" in fine and "1.0–11.0s" in fine
