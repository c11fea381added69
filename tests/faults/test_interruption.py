"""Ctrl-C (once or twice) and SIGKILL to the controller mid-run.

One host answers at once; the other hangs in an import (a module on its PYTHONPATH that never
finishes loading, like a driver call that hangs), so the run is mid-flight when the signal lands.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import (
    Controller,
    _cmdline,
    assert_nothing_left,
    host_processes,
    inventory_for,
    start_fleet,
    strictly_json,
    wait_until,
)
from tests.faults.unfinished import HANGING_MODULE, assert_findings_everywhere
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults


def start_mid_run(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any, marker: int
) -> tuple[Controller, str, str]:
    """Start a run of a fast and a hanging host; return once the fast one is done."""
    stub = tmp_path / "hanging"
    stub.mkdir()
    (stub / "hangs_here.py").write_text(HANGING_MODULE.format(marker=marker))
    fast = fresh_host("fast")
    hanging = fresh_host("hanging", {"PYTHONPATH": str(stub)})
    inventory = inventory_for(farm, tmp_path, [fast, hanging])
    controller = start_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system,imports", "--import", "hangs_here:X"
    )
    running = lambda: any(f"sleep {marker}" in _cmdline(p) for p in host_processes(farm, hanging))  # noqa: E731
    assert wait_until(running, 15), controller.finish(5).stderr
    time.sleep(0.5)
    assert wait_until(lambda: not host_processes(farm, fast), 10)
    return controller, fast, hanging


def assert_interrupted_run_saved(tmp_path: Path, result: Any, fast: str, hanging: str) -> None:
    assert result.returncode == 130, result.stderr
    assert result.status(fast) == "ok"
    assert result.status(hanging) == "interrupted"
    assert result.host(hanging)["probes"]["system"]["status"] == "ok"  # finished: kept
    saved = list((tmp_path / "state" / "fleet" / "runs").glob("*.json"))
    assert len(saved) == 1
    document = strictly_json(saved[0].read_text())
    assert document["interrupted"] is True
    assert document["hosts"][fast]["status"] == "ok"
    assert "Traceback" not in result.stderr + result.stdout


def test_sigint_marks_pending_hosts_interrupted_and_saves_finished_ones(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    controller, fast, hanging = start_mid_run(farm, tmp_path, fresh_host, 611)
    controller.signal(signal.SIGINT)
    started = time.monotonic()
    result = controller.finish(30)
    assert time.monotonic() - started < 10
    assert_interrupted_run_saved(tmp_path, result, fast, hanging)
    assert_nothing_left(farm, hanging, "sleep 611")
    # the host it interrupted is a finding (issue 46): run it again, on every surface
    saved = next((tmp_path / "state" / "fleet" / "runs").glob("*.json"))
    assert_findings_everywhere(tmp_path, saved, "interrupted", [hanging])


def test_second_sigint_still_ends_cleanly(farm: SshdFarm, tmp_path: Path, fresh_host: Any) -> None:
    controller, fast, hanging = start_mid_run(farm, tmp_path, fresh_host, 612)
    controller.signal(signal.SIGINT)
    for pause in (0.05, 0.3, 0.3):  # while it cancels, closes connections and saves
        time.sleep(pause)
        if controller.process.poll() is None:
            controller.signal(signal.SIGINT)
    result = controller.finish(30)
    assert_interrupted_run_saved(tmp_path, result, fast, hanging)
    assert_nothing_left(farm, hanging, "sleep 612")


def test_sigkill_leaves_earlier_runs_intact_and_no_half_written_file(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    earlier_dir = tmp_path / "earlier"
    earlier_dir.mkdir()
    runs = tmp_path / "runs"
    good = fresh_host("earlier")
    inventory = inventory_for(farm, earlier_dir, [good])
    earlier = start_fleet(
        earlier_dir, "probe", "-i", str(inventory), "-p", "system", "--runs-dir", str(runs)
    ).finish(60)
    assert earlier.returncode == 0
    before = {p.name: p.read_bytes() for p in runs.iterdir()}
    assert len(before) == 1

    controller, _, hanging = start_mid_run(farm, tmp_path, fresh_host, 613)
    controller.process.kill()
    controller.finish(10)

    assert {p.name: p.read_bytes() for p in runs.iterdir()} == before
    assert not list((tmp_path / "state").rglob(".*")), "a temporary file was left behind"
    assert not (tmp_path / "run.json").exists()
    # the host's runner notices the dead channel at its next heartbeat and stops its probes
    assert_nothing_left(farm, hanging, "sleep 613")
