"""`fleet fabric --backend gloo` against real sshd hosts, each in its own network namespace.

Real parts only: sshd, veths on a bridge, tc rate limits, torch.distributed ranks (gloo on CPU).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fabric.conftest import NetnsFleet
from tests.fabric.netns_helpers import (
    QUICK,
    TOLERANCE,
    assert_nothing_left,
    fabric,
    measured,
)
from tests.faults.conftest import start_fleet, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.torch]  # the ranks run torch.distributed


def pair(document: dict[str, Any], one: str, other: str) -> dict[str, Any]:
    found = [p for p in document["fabric"]["pairs"] if set(p["hosts"]) == {one, other}]
    assert len(found) == 1, f"{one} ↔ {other}: {found}"
    return found[0]


def test_all_pairs_of_four_hosts_measured_correct_and_nothing_left(
    netns_fleet: NetnsFleet, tmp_path: Path
) -> None:
    names = list(netns_fleet.hosts)
    document = fabric(tmp_path, netns_fleet.inventory(tmp_path, names), "--pairs", "all")
    section = document["fabric"]
    assert len(section["pairs"]) == 6
    for one in names:
        for other in names:
            if one < other:
                measured = pair(document, one, other)
                assert measured["status"] == "ok", measured
                assert measured["correct"] is True
                assert measured["busbw_gbps"] > 0
                assert measured["latency_us"] > 0
    ring = section["ring"]
    assert ring["status"] == "ok"
    assert ring["correct"] is True
    assert ring["ranks"] == 4
    # each rank bound its own namespace's address: gloo was pointed at that interface
    assert {section["env"][n]["GLOO_SOCKET_IFNAME"] for n in names} == {
        netns_fleet.inner_veth(n) for n in names
    }
    assert document["_exit"] == 0, document["_stdout"]
    assert "busbw GB/s per pair" in document["_stdout"]
    assert_nothing_left(netns_fleet)


def test_an_unreachable_fifth_host_costs_only_its_own_pairs(
    netns_fleet: NetnsFleet, tmp_path: Path
) -> None:
    names = list(netns_fleet.hosts)
    gone = {"gone": {"address": f"10.77.{netns_fleet.subnet}.99", "port": 22}}  # nobody there
    inventory = netns_fleet.inventory(tmp_path, names, gone, connect_timeout=3)
    started = time.monotonic()
    document = fabric(tmp_path, inventory, "--pairs", "all")
    elapsed = time.monotonic() - started
    pairs = document["fabric"]["pairs"]
    assert len(pairs) == 10
    measured = [p for p in pairs if "gone" not in p["hosts"]]
    assert [p["status"] for p in measured] == ["ok"] * 6
    for skipped in [p for p in pairs if "gone" in p["hosts"]]:
        assert skipped["status"] == "skipped"
        assert "gone not reached" in skipped["error"]
        assert "cannot connect" in skipped["error"]
    assert document["fabric"]["ring"]["ranks"] == 4
    assert document["hosts"]["gone"]["status"] == "unreachable"
    assert {"kind": "host", "hosts": ["gone"]}.items() <= document["fabric"]["suspects"][0].items()
    assert document["_exit"] & 4
    assert elapsed < 200
    assert_nothing_left(netns_fleet)


def test_a_slowed_host_is_named_the_suspect(netns_fleet: NetnsFleet, tmp_path: Path) -> None:
    names = list(netns_fleet.hosts)
    slow = names[2]
    netns_fleet.slow_host(slow, "60mbit")
    document = fabric(
        tmp_path, netns_fleet.inventory(tmp_path, names), "--pairs", "all", *TOLERANCE
    )
    suspects = document["fabric"]["suspects"]
    assert [(s["kind"], s["hosts"]) for s in suspects] == [("host", [slow])], measured(document)
    assert "bad with 3 of 3 partners" in suspects[0]["reason"]
    assert document["hosts"][slow]["probes"]["fabric"]["data"]["suspect"] == "host"
    assert "suspects" in document["_stdout"]
    assert slow in document["_stdout"]


def test_one_slow_link_is_named_and_not_its_hosts(netns_fleet: NetnsFleet, tmp_path: Path) -> None:
    names = list(netns_fleet.hosts)
    netns_fleet.slow_link(names[0], names[1], "60mbit")
    document = fabric(
        tmp_path, netns_fleet.inventory(tmp_path, names), "--pairs", "all", *TOLERANCE
    )
    suspects = document["fabric"]["suspects"]
    assert [(s["kind"], sorted(s["hosts"])) for s in suspects] == [("link", sorted(names[:2]))], (
        measured(document)
    )
    assert "both hosts are fine with other partners" in suspects[0]["reason"]


def test_a_busy_port_means_another_port(netns_fleet: NetnsFleet, tmp_path: Path) -> None:
    names = list(netns_fleet.hosts)
    port = 31337
    holder = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            netns_fleet.hosts[names[0]],
            "python3",
            "-c",
            f"import socket,time; s=socket.socket(); s.bind(('', {port})); s.listen(); time.sleep(120)",
        ]
    )
    try:
        time.sleep(0.5)
        document = fabric(
            tmp_path,
            netns_fleet.inventory(tmp_path, names),
            "--master-port",
            str(port),
            "--no-group",
            "--seed",
            "1",
        )
    finally:
        holder.kill()
        holder.wait()
    pairs = document["fabric"]["pairs"]
    assert [p["status"] for p in pairs] == ["ok", "ok"], pairs
    assert port not in {p["port"] for p in pairs}


def rank_running(fleet: NetnsFleet, name: str) -> bool:
    """A rank of `name` has imported torch (so it is in a round, not in discovery)."""
    for pid in fleet.pids_in(name):
        try:
            if "libtorch" in Path(f"/proc/{pid}/maps").read_text():
                return True
        except OSError:
            continue
    return False


def test_a_host_that_dies_mid_round_fails_its_pairs_only(
    netns_fleet: NetnsFleet, tmp_path: Path
) -> None:
    names = list(netns_fleet.hosts)
    victim = names[3]
    inventory = netns_fleet.inventory(tmp_path, names, connect_timeout=3)
    out = tmp_path / "fabric.json"
    controller = start_fleet(
        tmp_path, "fabric", "-i", str(inventory), *QUICK, "--pairs", "all", "--json", str(out)
    )
    assert wait_until(lambda: rank_running(netns_fleet, victim), 60), "no rank started"
    sshd = netns_fleet.farm.hosts[victim].process
    assert sshd is not None
    for pid in [sshd.pid, *netns_fleet.pids_in(victim)]:  # the host goes down, sshd and all
        subprocess.run(["kill", "-9", str(pid)], capture_output=True)
    result = controller.finish(timeout=240)
    document = json.loads(out.read_text())
    pairs = document["fabric"]["pairs"]
    lost = [p for p in pairs if victim in p["hosts"]]
    assert (len(lost), len(pairs)) == (3, 6), pairs  # all pairs of 4 hosts; 3 with the victim
    for p in lost:
        assert p["status"] in ("failed", "timeout"), p
        assert victim in p["error"], p
    assert [p["status"] for p in pairs if p not in lost] == ["ok"] * 3, pairs
    assert ("host", [victim]) in [(s["kind"], s["hosts"]) for s in document["fabric"]["suspects"]]
    assert result.returncode & 8, result.stderr
    assert_nothing_left(netns_fleet)


def test_ctrl_c_mid_round_leaves_no_rank(netns_fleet: NetnsFleet, tmp_path: Path) -> None:
    names = list(netns_fleet.hosts)
    inventory = netns_fleet.inventory(tmp_path, names)
    controller = start_fleet(tmp_path, "fabric", "-i", str(inventory), *QUICK, "--pairs", "all")
    assert wait_until(lambda: rank_running(netns_fleet, names[0]), 60), "no rank started"
    controller.signal(signal.SIGINT)
    result = controller.finish(timeout=60)
    assert result.returncode == 130, result.stderr
    assert_nothing_left(netns_fleet)
