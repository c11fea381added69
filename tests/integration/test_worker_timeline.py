"""FLEET_WORKER_TIMELINE: what bench/workers_scale.py reads to say where a run over workers spent
its wall. One line from the parent (its relay), one from the seed, one from each worker's
fan-out, their hosts' finishing times on one clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import run_fleet, ssh_host, write_inventory
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration


def test_the_parent_the_seed_and_each_worker_write_their_stamps(
    farm: SshdFarm, tmp_path: Path
) -> None:
    names = ["stamped-0", "stamped-1"]
    for index, name in enumerate(names):
        farm.start(name, f"127.0.13.{index + 20}")
    hosts = {n: ssh_host(farm, n) for n in names}
    known = farm.known_hosts(tmp_path / "known_hosts", names)
    inventory = write_inventory(tmp_path / "inv.yaml", farm, hosts, known)
    timeline = tmp_path / "timeline"
    args = ("probe", "-i", str(inventory), "-p", "system", "--workers", "2")
    done = run_fleet(tmp_path, *args, env={"FLEET_WORKER_TIMELINE": str(timeline)})
    assert all(done.status(n) == "ok" for n in names), done.stderr

    records = [json.loads(line) for line in timeline.read_text().splitlines()]
    by_role = {role: [r for r in records if r["role"] == role] for role in ("relay", "seed")}
    fanouts = [r for r in records if r["role"] == "fanout"]
    assert len(by_role["relay"]) == len(by_role["seed"]) == 1
    relay = by_role["relay"][0]
    assert len(relay["finished"]) == relay["hosts"] == 2
    assert sorted(relay["workers"].values()) == sorted(r["pid"] for r in fanouts)
    assert relay["marks"]["seed_starting"] <= by_role["seed"][0]["marks"]["forking"]
    for fanout in fanouts:
        assert fanout["hosts"] == len(fanout["finished"]) == 1
        assert fanout["started"] - 0.001 <= fanout["finished"][0] <= fanout["ended"] + 0.001  # 1 ms
        assert fanout["finished"][0] <= max(relay["finished"]) + 0.001  # then relayed
        assert fanout["waits_s"]["handshake"] > 0
