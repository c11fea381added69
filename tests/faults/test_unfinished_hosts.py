"""Hosts that time out are findings (issue 46, item 2): "3 hosts: 2 timeout, 1 ok" and exit 8
used to sit under "✓ no findings". Two real hosts hang in an import (a module on their PYTHONPATH
that never finishes loading) until the run's deadline; the third answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import assert_nothing_left, inventory_for
from tests.faults.unfinished import HANGING_MODULE, assert_findings_everywhere
from tests.integration.conftest import run_fleet
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults


def test_timed_out_hosts_are_one_finding_on_every_surface(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    stub = tmp_path / "hanging"
    stub.mkdir()
    (stub / "hangs_here.py").write_text(HANGING_MODULE.format(marker=613))
    fast = fresh_host("fast")
    hanging = [fresh_host("hangs", {"PYTHONPATH": str(stub)}) for _ in range(2)]
    inventory = inventory_for(farm, tmp_path, [fast, *hanging])
    result = run_fleet(
        tmp_path,
        *("probe", "-i", str(inventory), "-p", "system,imports", "--import", "hangs_here:X"),
        *("-t", "6"),
        env={"COLUMNS": "80"},
    )
    assert result.returncode == 8, result.stderr
    assert [result.status(h) for h in hanging] == ["timeout", "timeout"], result.stdout
    assert result.status(fast) == "ok"
    assert "timed out: no result within 6 s from: imports" in result.stdout
    assert "✓" not in result.stdout
    assert "no findings" not in result.stdout
    assert_findings_everywhere(tmp_path, tmp_path / "run.json", "timeout", hanging)
    for host in hanging:
        assert_nothing_left(farm, host, "sleep 613")
