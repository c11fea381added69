"""The workers' seed started before a big inventory is read (fleet/api/commands.py ProbePlan.make,
fleet/execution/limits.py early_seed_workers) never outlives the command: not when the run needs
no worker after all, and not when the inventory turns out to be wrong."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from fleet.execution.limits import EARLY_SEED_BYTES
from tests.integration.fleet_runs import run_fleet


def processes_marked(mark: str) -> list[int]:
    """Live processes whose environment holds `mark` (the command's and everything it started)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if mark.encode() in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
    return found


def big_inventory(path: Path, hosts: str) -> Path:
    path.write_text("# a rack's notes\n" * (EARLY_SEED_BYTES // 16 + 1) + hosts)
    return path


def test_a_seed_started_for_a_run_that_needs_no_worker_is_gone(tmp_path: Path) -> None:
    # two hosts: too few for a worker; nothing listens on port 9, so each fails at once
    hosts = "hosts:\n  a: {address: 127.0.0.1, port: 9}\n  b: {address: 127.0.0.1, port: 9}\n"
    inventory = big_inventory(tmp_path / "inv.yaml", hosts)
    mark = f"FLEET_TEST_MARK={uuid.uuid4()}"
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--debug",
                       env={"FLEET_TEST_MARK": mark.split("=")[1]})  # fmt: skip
    assert result.status("a") == result.status("b") == "unreachable", result.stderr
    assert "seed started before the inventory is read" in result.stderr
    assert "seed was not needed: ended" in result.stderr
    assert processes_marked(mark) == []


def test_a_seed_started_before_a_broken_inventory_is_read_is_gone(tmp_path: Path) -> None:
    inventory = big_inventory(tmp_path / "inv.yaml", "hosts:\n  a: [unclosed\n")
    mark = f"FLEET_TEST_MARK={uuid.uuid4()}"
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--debug",
                       env={"FLEET_TEST_MARK": mark.split("=")[1]})  # fmt: skip
    assert result.returncode == 2, result.stderr  # bad input, said with its place
    assert "inv.yaml" in result.stderr
    assert "seed started before the inventory is read" in result.stderr
    assert "seed was not needed: ended" in result.stderr
    assert processes_marked(mark) == []
