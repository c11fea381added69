"""`fleet probe --workers N` over real sshd hosts: the same run as one process makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.execution.limits import EARLY_SEED_BYTES
from fleet.execution.timeline import TIMELINE_ENV
from tests.integration.conftest import run_fleet, ssh_host, write_inventory
from tests.integration.fleet_runs import without_timings
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration


def test_two_workers_make_the_run_one_process_makes(farm: SshdFarm, tmp_path: Path) -> None:
    names = [f"spread-{i}" for i in range(5)]
    for index, name in enumerate(names):
        farm.start(name, f"127.0.12.{index + 2}")
    hosts = {n: ssh_host(farm, n) for n in names}
    hosts["spread-refused"] = {"address": "127.0.12.99", "port": 9}  # nothing listens there
    known = farm.known_hosts(tmp_path / "known_hosts", names)
    inventory = write_inventory(tmp_path / "inv.yaml", farm, hosts, known)
    runs = {}
    for workers in ("1", "2"):
        folder = tmp_path / f"workers-{workers}"
        folder.mkdir()
        args = ("probe", "-i", str(inventory), "-p", "system,packages", "--workers", workers)
        runs[workers] = run_fleet(folder, *args, "--debug")

    one, two = runs["1"], runs["2"]
    assert "over 2 worker processes" in two.stderr
    assert "worker process" not in one.stderr
    assert one.returncode == two.returncode != 0, two.stderr  # the refused host: a host error
    assert two.status("spread-refused") == "unreachable"
    assert all(two.status(n) == "ok" for n in names), two.stderr
    assert list(two.document["hosts"]) == list(one.document["hosts"])  # the inventory's order
    assert without_timings(two.document) == without_timings(one.document)
    saved = [json.loads(p.read_text()) for p in (tmp_path / "workers-2").rglob("runs/*.json")]
    assert len(saved) == 1
    assert set(saved[0]["hosts"]) == set(hosts)


def test_a_big_inventory_starts_the_seed_before_it_is_read(farm: SshdFarm, tmp_path: Path) -> None:
    """An inventory past EARLY_SEED_BYTES: the seed starts before the hosts are known (its
    stamp before the relay's start), and the run is the one the late seed makes."""
    names = [f"early-{i}" for i in range(3)]
    for index, name in enumerate(names):
        farm.start(name, f"127.0.13.{index + 2}")
    hosts = {n: ssh_host(farm, n) for n in names}
    known = farm.known_hosts(tmp_path / "known_hosts", names)
    small = write_inventory(tmp_path / "small.yaml", farm, hosts, known)
    big = tmp_path / "big.yaml"  # the same hosts, padded with comments past the threshold
    padding = "# a rack's notes\n" * (EARLY_SEED_BYTES // 16 + 1)
    big.write_text(padding + small.read_text())
    runs, relay = {}, {}  # each run, and its parent's stamps (FLEET_WORKER_TIMELINE)
    for inventory in (small, big):
        folder = tmp_path / inventory.stem
        folder.mkdir()
        timeline = folder / "timeline.jsonl"
        args = ("probe", "-i", str(inventory), "-p", "system", "--workers", "2")
        runs[inventory.stem] = run_fleet(folder, *args, env={TIMELINE_ENV: str(timeline)})
        lines = [json.loads(line) for line in timeline.read_text().split()]
        relay[inventory.stem] = next(line for line in lines if line["role"] == "relay")

    for name in ("small", "big"):
        assert runs[name].returncode == 0, runs[name].stderr
        assert all(runs[name].status(n) == "ok" for n in names)
    documents = [without_timings(runs[name].document) for name in ("small", "big")]
    assert [{**d, "inventory": None} for d in documents] == [
        {**documents[0], "inventory": None}
    ] * 2
    assert relay["big"]["marks"]["seed_starting"] < relay["big"]["started"]  # before the hosts
    assert relay["small"]["marks"]["seed_starting"] >= relay["small"]["started"]
