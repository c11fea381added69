"""Hundreds of hosts behind one bastion share its one connection per worker process: every channel
is open at the same moment (a barrier on the hosts proves it) and none starves; the bastion's
MaxSessions bounds session channels only, not the direct-tcpip tunnels through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.conftest import run_fleet, write_inventory
from tests.integration.sshd import SshdFarm

pytestmark = [pytest.mark.faults, pytest.mark.slow]

HOSTS = 200  # inventory hosts, all behind the bastion
WORKERS = 2  # each opens its own connection to the bastion, shared by its hosts
TARGET_SSHD = 10  # real sshd serving them (HOSTS / TARGET_SSHD names each, as side_by_side does)
BARRIER = ROOT / "tests" / "fakes" / "bin" / "barrier-python"


def test_hundreds_of_hosts_hold_their_channels_at_once_through_one_bastion(
    farm: SshdFarm, tmp_path: Path
) -> None:
    bastion = farm.start("bastion-many", "127.0.59.1", MaxSessions="2", LogLevel="DEBUG1")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {"BARRIER_DIR": str(barrier), "BARRIER_COUNT": str(HOSTS), "BARRIER_WAIT_S": "240"}
    servers = [
        farm.start(f"many-{i:02d}", f"127.0.59.{i + 2}", set_env=env) for i in range(TARGET_SSHD)
    ]
    known = farm.known_hosts(tmp_path / "known_hosts", ["bastion-many", *(s.name for s in servers)])
    hosts = {"bastion-many": {"address": bastion.address, "port": bastion.port, "jump": None}}
    for index in range(HOSTS):
        server = servers[index % TARGET_SSHD]
        hosts[f"far-{index:03d}"] = {"address": server.address, "port": server.port}
    inventory = write_inventory(
        tmp_path / "inv.yaml", farm, hosts, known, jump="bastion-many", python=str(BARRIER),
        connect_timeout=60,
    )  # fmt: skip

    result = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "-l", "far-*", "-t", "400",
        "--workers", str(WORKERS), timeout=600,
    )  # fmt: skip

    statuses = {n: result.status(n) for n in hosts if n.startswith("far-")}
    bad = {n: (s, result.host(n)["error"]) for n, s in statuses.items() if s != "ok"}
    assert not bad, dict(list(bad.items())[:5])
    assert len(list(barrier.iterdir())) == HOSTS
    assert bastion.log is not None
    log = bastion.log.read_text()
    assert log.count("Accepted publickey") == WORKERS, "one shared bastion connection per worker"
    assert log.count("direct-tcpip") >= HOSTS
