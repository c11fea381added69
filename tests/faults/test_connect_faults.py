"""Hosts that cannot be reached: each ends `unreachable` within its connect deadline, the others
are unaffected, and the exit code has bit 4."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import NetFaults, inventory_for
from tests.integration.conftest import closed_port, run_fleet
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults

CONNECT_TIMEOUT_S = 2


def test_unreachable_hosts_fail_within_the_connect_deadline(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any, net: NetFaults, black_hole: str
) -> None:
    good = fresh_host("good")
    silent, garbage = net.silent(), net.garbage()
    bad = {
        "port-closed": {"address": "127.0.0.1", "port": closed_port()},
        "black-holed": {"address": black_hole, "port": 22},
        "no-banner": {"address": silent[0], "port": silent[1]},
        "garbage-banner": {"address": garbage[0], "port": garbage[1]},
    }
    inventory = inventory_for(farm, tmp_path, [good], bad, connect_timeout=CONNECT_TIMEOUT_S)

    started = time.monotonic()
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "-t", "30")
    elapsed = time.monotonic() - started

    assert result.status(good) == "ok", result.stdout
    assert result.returncode == 4, result.stderr
    for name in bad:
        host = result.host(name)
        assert host["status"] in ("unreachable", "timeout"), (name, host)
        assert host["elapsed_s"] < CONNECT_TIMEOUT_S + 5, (name, host)  # not the 30 s deadline
        assert host["error"], (name, host)
        assert host["hint"], (name, host)
    assert "refused" in result.host("port-closed")["error"]
    assert f"no answer within {CONNECT_TIMEOUT_S} s" in result.host("black-holed")["error"]
    # python start-up and the good host's probe aside, the run waited for no one (-t 30)
    assert elapsed < 25
    assert "Traceback" not in result.stdout + result.stderr
