"""The net probe for real over SSH: three sshd hosts on loopback (this machine: no RDMA device),
one of them with NCCL settings that name devices it does not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import run_fleet, ssh_host, write_inventory
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration


def test_net_over_ssh_says_no_rdma_and_names_a_setting_that_names_nothing(
    farm: SshdFarm, tmp_path: Path
) -> None:
    names = ["net-1", "net-2", "net-3"]
    for index, name in enumerate(names):
        env = {"NCCL_IB_HCA": "=mlx5_0", "NCCL_SOCKET_IFNAME": "ib0"} if name == "net-3" else {}
        farm.start(name, f"127.0.5.{index + 1}", env)
    inventory = write_inventory(
        tmp_path / "inv.yaml",
        farm,
        {n: ssh_host(farm, n) for n in names},
        farm.known_hosts(tmp_path / "known_hosts", names),
    )
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "net,system")
    assert all(result.status(n) == "ok" for n in names), result.stdout + result.stderr
    for name in names:
        net = result.host(name)["probes"]["net"]
        assert net["status"] == "ok"
        assert net["data"]["rdma"]["summary"].startswith("no RDMA devices: ")
        assert net["data"]["timings_s"]["total"] < 0.3
    odd = result.host("net-3")["probes"]["net"]["data"]
    assert [line.split(" (")[0] for line in odd["settings_problems"]] == [
        "NCCL_IB_HCA==mlx5_0",
        "NCCL_SOCKET_IFNAME=ib0",
    ]
    assert "mlx5_0 names no RDMA port here (RDMA ports here: none)" in odd["settings_problems"][0]

    run = tmp_path / "run.json"
    check = run_fleet(tmp_path, "check", "--run", str(run), "--pack", "inference", "--json", "-")
    document = json.loads(check.stdout)
    rule = next(r for r in document["rules"] if r["id"] == "net-nccl-settings-name-devices")
    assert {host: v["verdict"] for host, v in rule["hosts"].items()} == {
        "net-1": "pass",
        "net-2": "pass",
        "net-3": "fail",
    }
    assert "NCCL_SOCKET_IFNAME=ib0" in rule["hosts"]["net-3"]["fix"]
