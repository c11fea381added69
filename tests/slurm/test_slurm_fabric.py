"""`fleet fabric --slurm ...` (all pairs, isolate, inside a job) against the real Slurm test
cluster (tests/slurm/cluster.py): gloo ranks on CPU with the real torch, each group its own srun
step over exactly its nodes, gpu-05 drained."""

from __future__ import annotations

import collections
import json
import sys
import time
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import FleetResult, run_fleet
from tests.slurm.cluster import NodeStack, SlurmCluster
from tests.slurm.conftest import DRAIN_REASON

pytestmark = [pytest.mark.integration, pytest.mark.torch]  # the real torch on every node

USABLE = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]


@pytest.fixture
def real_torch(cluster: SlurmCluster, tmp_path: Path) -> Iterator[SlurmCluster]:
    """The nodes import the controller's torch (no stub on PYTHONPATH): gloo ranks really run."""
    pytest.importorskip("torch")
    empty = tmp_path / "no-stub"
    empty.mkdir()
    stacks = {n: NodeStack(s.gpu_capture, empty) for n, s in cluster.stacks.items()}
    with cluster.stacks_replaced(stacks):
        yield cluster


def fabric(cluster: SlurmCluster, tmp_path: Path, *args: str) -> tuple[FleetResult, dict]:
    out = tmp_path / "fabric.json"
    result = run_fleet(
        tmp_path, "fabric", "--backend", "gloo", "--sizes", "8,64K", "--timeout", "60",
        "--no-save", "--json", str(out), "--python", sys.executable, *args,
        env={"SLURM_CONF": str(cluster.conf)}, timeout=300,
    )  # fmt: skip
    assert out.exists(), result.stderr
    return result, json.loads(out.read_text())


def by_pair(section: dict) -> dict[frozenset[str], dict]:
    return {frozenset(p["hosts"]): p for p in section["pairs"]}


def busy_port_launches(groups: list[dict[str, Any]]) -> collections.Counter[str]:
    """The launches a busy rendezvous port cost: the group's nodes once more per such port."""
    return collections.Counter(
        name for group in groups for _ in group.get("busy_ports", []) for name in group["hosts"]
    )


def test_all_pairs_of_usable_nodes_measured_drained_node_skipped(
    real_torch: SlurmCluster, tmp_path: Path
) -> None:
    cluster = real_torch
    result, document = fabric(cluster, tmp_path, "--slurm", "partition=gpu", "--pairs", "all")
    assert result.returncode == 0, result.stderr  # a drained node sets no exit bit
    pairs = by_pair(document["fabric"])
    for a, b in combinations(USABLE, 2):
        pair = pairs[frozenset((a, b))]
        assert (pair["status"], pair["correct"]) == ("ok", True), pair
        assert pair["busbw_gbps"] > 0
    for other in USABLE:
        pair = pairs[frozenset((other, "gpu-05"))]
        assert pair["status"] == "skipped"
        assert DRAIN_REASON in pair["error"], pair
    ring = document["fabric"]["ring"]
    assert sorted(ring["hosts"]) == USABLE
    assert (ring["status"], ring["correct"]) == ("ok", True), ring
    host = document["hosts"]["gpu-05"]
    assert host["status"] == "unavailable"
    assert DRAIN_REASON in host["error"]
    assert document["transport"] == "slurm"
    assert document["slurm"]["nodes"]["gpu-05"]["reason"] == DRAIN_REASON
    # each node launched once to be discovered, once per pair (3), once for the full group, and
    # once more per busy rendezvous port its group met; gpu-05 never: every step held exactly its
    # group's nodes
    expected = collections.Counter(dict.fromkeys(USABLE, 5))
    assert collections.Counter(cluster.launched()) == expected + busy_port_launches(
        [*document["fabric"]["pairs"], ring]
    )
    assert cluster.wait_until_no_tasks() == []
    cluster.wait_until_no_jobs()


def test_isolate_runs_each_group_as_its_own_step_and_skips_the_drained_node(
    real_torch: SlurmCluster, tmp_path: Path
) -> None:
    """The adaptive search through Slurm: every group it ran was one srun step over exactly its
    nodes (the launches add up), the drained node took no part, nothing was left running. Which
    group is slow on loopback is noise, so only a generous tolerance keeps a suspect out."""
    cluster = real_torch
    result, document = fabric(
        cluster, tmp_path, "--slurm", "partition=gpu", "--pairs", "isolate", "--tolerance", "4"
    )
    section = document["fabric"]
    assert section["pair_mode"] == "isolate"
    assert section["isolate"]["rounds"] >= 1
    assert section["pairs"], section
    for group in section["pairs"]:
        assert (group["status"], group["correct"]) == ("ok", True), group
        assert "gpu-05" not in group["hosts"]
    assert DRAIN_REASON in (section["skipped_hosts"].get("gpu-05") or ""), section["skipped_hosts"]
    # as with --pairs all, the only suspect is the node that could not be reached
    assert [(s["kind"], s["hosts"]) for s in section["suspects"]] == [("host", ["gpu-05"])]
    assert result.returncode == 0, result.stderr
    # one discovery launch per usable node, then one per group it was in (and per busy port)
    ran = collections.Counter(name for group in section["pairs"] for name in group["hosts"])
    expected = collections.Counter(USABLE) + ran + busy_port_launches(section["pairs"])
    assert collections.Counter(cluster.launched()) == expected
    assert cluster.wait_until_no_tasks() == []
    cluster.wait_until_no_jobs()


def test_job_target_runs_the_groups_inside_that_job(
    real_torch: SlurmCluster, tmp_path: Path
) -> None:
    cluster = real_torch
    job = cluster.run(
        "sbatch", "--parsable", "-N3", "-w", "gpu-[01-03]", "-o", "/dev/null", "--wrap", "sleep 300"
    ).strip()
    try:
        _wait_running(cluster, job)
        result, document = fabric(
            cluster, tmp_path, "--slurm", f"job={job}", "--pairs", "ring",
            "--slurm-args", "--comment=fleet-fabric",
        )  # fmt: skip
    finally:
        cluster.run("scancel", job)
    assert result.returncode == 0, result.stderr
    assert sorted(document["hosts"]) == ["gpu-01", "gpu-02", "gpu-03"]
    assert document["slurm"]["job_id"] == job
    assert all(p["status"] == "ok" and p["correct"] for p in document["fabric"]["pairs"])
    assert len(document["fabric"]["pairs"]) == 3
    assert document["fabric"]["ring"]["status"] == "ok"
    assert cluster.wait_until_no_tasks() == []


def _wait_running(cluster: SlurmCluster, job: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip() != "RUNNING":
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job} not running after {timeout_s} s")
        time.sleep(0.2)
