"""50 targets behind one throttling bastion (MaxStartups 3:100:3, MaxSessions 2): every target
ends `ok`, through one shared bastion connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import run_fleet, ssh_host, write_inventory
from tests.integration.sshd import SshdFarm

pytestmark = [pytest.mark.faults, pytest.mark.slow]

TARGETS = 50


def test_fifty_targets_behind_a_throttling_bastion_all_ok(farm: SshdFarm, tmp_path: Path) -> None:
    bastion = farm.start(
        "bastion-50", "127.0.58.1", MaxStartups="3:100:3", MaxSessions="2", LogLevel="DEBUG1"
    )
    names = [f"behind-{i:02d}" for i in range(TARGETS)]
    for index, name in enumerate(names):
        farm.start(name, f"127.0.58.{index + 2}")
    known = farm.known_hosts(tmp_path / "known_hosts", ["bastion-50", *names])
    hosts = {"bastion-50": {**ssh_host(farm, "bastion-50"), "jump": None}}
    hosts |= {n: ssh_host(farm, n) for n in names}
    inventory = write_inventory(
        tmp_path / "inv.yaml", farm, hosts, known, jump="bastion-50", connect_timeout=20
    )

    result = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "-l", "behind-*", "-t", "120"
    )

    statuses = {n: result.status(n) for n in names}
    assert set(statuses.values()) == {"ok"}, {n: s for n, s in statuses.items() if s != "ok"}
    assert result.returncode == 0
    assert bastion.log is not None
    log = bastion.log.read_text()
    assert log.count("Accepted publickey") == 1, "one shared bastion connection"
    assert log.count("direct-tcpip") >= TARGETS
