"""`fleet check --slurm … --drain` / `--resume` against the real Slurm cluster (tests/slurm/):
one node replays a sick GPU (GPU1's row remap pending: the real H200 pair's `nvidia-smi -q -x`
with the public capture remap_pending_gpud80), the others the same pair healthy; gpu-05 is
drained by hand for another reason (tests/slurm/conftest.py). Every state is read back from
Slurm itself (`scontrol show node`, sinfo)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FAKES, ROOT
from tests.integration.conftest import FleetResult, fleet_invocation, fleet_result
from tests.recorded import h200_stack
from tests.slurm.cluster import NodeStack, SlurmCluster
from tests.slurm.conftest import DRAIN_REASON

pytestmark = pytest.mark.integration

SICK, HUNG = "gpu-02", "gpu-03"
PROBES = "system,gpu,health"
REASON = re.compile(
    r"^fleet: gpu-02 GPU1 health-row-remap → reset-gpu, run \d{8}T\d{6}Z-[0-9a-f]{8}$"
)


@pytest.fixture
def stacks(tmp_path: Path) -> tuple[dict[str, NodeStack], dict[str, NodeStack]]:
    """(one sick node among healthy ones, every node healthy)."""
    torch = FAKES / "stubs" / "torch_h200_symm"
    healthy = NodeStack(h200_stack(tmp_path / "healthy", "h200x2"), torch)
    sick = NodeStack(h200_stack(tmp_path / "sick", "remap_pending_gpud80"), torch)
    nodes = [f"gpu-0{i}" for i in range(1, 6)]
    all_healthy = dict.fromkeys(nodes, healthy)
    return {**all_healthy, SICK: sick}, all_healthy


@pytest.fixture
def drain_cluster(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The session's cluster, every node but gpu-05 back in service afterwards."""
    yield cluster
    for reservation in re.findall(r"ReservationName=(\S+)", cluster.scontrol("show", "res")):
        cluster.scontrol("delete", f"ReservationName={reservation}")
    for node in cluster.nodes:
        if node != "gpu-05" and "DRAIN" in _node(cluster, node)["State"]:
            cluster.resume(node)
    _states(cluster)  # settled: every node heard from


def check(cluster: SlurmCluster, tmp_path: Path, *args: str, timeout: float = 120) -> FleetResult:
    command, env = fleet_invocation(
        tmp_path,
        ["check", "--no-save", "--slurm", "partition=gpu", "-p", PROBES, *args],
        {"SLURM_CONF": str(cluster.conf)},
    )
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,  # no terminal: --drain without --yes must refuse
    )
    return fleet_result(tmp_path, done.returncode, done.stdout, done.stderr)


def _node(cluster: SlurmCluster, name: str) -> dict[str, str]:
    """`scontrol show node NAME -o` as field → value (Reason last: it holds spaces)."""
    line = cluster.scontrol("show", "node", name, "-o").strip()
    head, _, reason = line.partition(" Reason=")
    fields = dict(item.split("=", 1) for item in head.split() if "=" in item)
    fields["Reason"] = re.sub(r" \[[^\]]*\]$", "", reason)  # Slurm adds [user@time]
    return fields


def _states(cluster: SlurmCluster, settle_s: float = 30) -> dict[str, tuple[str, str]]:
    """Every node's state and reason, once Slurm has heard from each (a node just returned to
    service is NOT_RESPONDING until slurmctld's ping is answered)."""
    deadline = time.monotonic() + settle_s
    while True:
        states = {
            n: (_node(cluster, n)["State"], _node(cluster, n)["Reason"]) for n in cluster.nodes
        }
        if time.monotonic() > deadline or not any(
            "NOT_RESPONDING" in s for s, _ in states.values()
        ):
            return states
        time.sleep(0.2)


def test_dry_run_prints_the_commands_and_changes_nothing(
    drain_cluster: SlurmCluster, stacks, tmp_path: Path
) -> None:
    sick, _ = stacks
    before = _states(drain_cluster)
    with drain_cluster.stacks_replaced(sick):
        result = check(drain_cluster, tmp_path, "--drain", "--dry-run")
    assert result.returncode == 32, result.stderr  # the failed rule; the dry run adds nothing
    command = next(line.strip() for line in result.stdout.splitlines() if "scontrol" in line)
    assert command.startswith("scontrol update NodeName=gpu-02 State=DRAIN 'Reason=fleet: gpu-02")
    assert REASON.match(command.split("Reason=", 1)[1].rstrip("'"))
    assert "dry run: nothing changed" in result.stdout
    assert _states(drain_cluster) == before

    with drain_cluster.stacks_replaced(sick):  # no --yes, no terminal: refused, nothing changed
        refused = check(drain_cluster, tmp_path, "--drain")
    assert refused.returncode == 2
    assert "no terminal to ask on" in refused.stderr
    assert "--yes" in refused.stderr
    assert _states(drain_cluster) == before


def test_drain_resume_cycle(drain_cluster: SlurmCluster, stacks, tmp_path: Path) -> None:
    """Drain exactly the sick node (not the hung one, not the one drained by hand); a second run
    changes nothing; once the fault is gone --resume returns it."""
    sick, healthy = stacks
    drain_cluster.set_hang(HUNG, True)
    with drain_cluster.stacks_replaced(sick):
        first = check(drain_cluster, tmp_path, "--drain", "--yes", "-t", "10")
    drain_cluster.set_hang(HUNG, False)
    assert first.returncode == 32 | 8, first.stderr  # the failed rule, the hung node
    sick_node = _node(drain_cluster, SICK)
    assert sick_node["State"] == "IDLE+DRAIN", sick_node
    assert REASON.match(sick_node["Reason"]), sick_node["Reason"]
    assert f"{SICK}: drained" in first.stdout
    states = _states(drain_cluster)
    assert {n: s for n, (s, _) in states.items() if n not in (SICK, "gpu-05")} == dict.fromkeys(
        ["gpu-01", "gpu-03", "gpu-04"], "IDLE"
    ), "the hung (not reached) node and the healthy ones stay in service"
    assert states["gpu-05"] == ("IDLE+DRAIN", DRAIN_REASON), "drained by hand: never touched"

    with drain_cluster.stacks_replaced(sick):
        second = check(drain_cluster, tmp_path, "--drain", "--yes")
    assert _states(drain_cluster) == states, "a second run changes nothing"
    assert "nothing to change in Slurm" in second.stdout

    with drain_cluster.stacks_replaced(sick):  # still sick: probed again, drained again
        still = check(drain_cluster, tmp_path, "--resume", "--yes")
    assert _states(drain_cluster) == states, still.stdout + still.stderr
    assert f"{SICK}: drained" in still.stdout
    assert "still health-row-remap" in still.stdout

    with drain_cluster.stacks_replaced(healthy):
        resumed = check(drain_cluster, tmp_path, "--resume", "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _node(drain_cluster, SICK)["State"] == "IDLE", resumed.stdout
    assert f"{SICK}: returned to service" in resumed.stdout
    assert _states(drain_cluster)["gpu-05"] == ("IDLE+DRAIN", DRAIN_REASON)
    assert "fleet-recheck" not in drain_cluster.scontrol("show", "res"), "reservation deleted"


def test_inventory_hosts_act_on_their_slurm_node(
    drain_cluster: SlurmCluster, stacks, tmp_path: Path
) -> None:
    """Hosts of an inventory that are Slurm nodes (`slurm_node:`) are drained and resumed as the
    nodes of --slurm are; they are reached without Slurm, so a drained one is probed as it is.
    Here they run on this machine (transport local), their GPUs the replayed H200 pair."""
    sick, healthy = stacks
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "hosts:\n"
        "  lab-02: {transport: local, slurm_node: gpu-02}\n"
        "  lab-x: {transport: local}\n"  # no Slurm node of that name: said, not drained
    )

    def run(stack: NodeStack, *args: str) -> FleetResult:
        env = {
            "SLURM_CONF": str(drain_cluster.conf),
            "PATH": f"{FAKES / 'bin'}:{os.environ['PATH']}",
            "FLEET_FAKE_GPU_DIR": str(stack.gpu_capture),
            "PYTHONPATH": f"{ROOT}:{stack.torch_stub}",
        }
        command, full_env = fleet_invocation(
            tmp_path, ["check", "--no-save", "-i", str(inventory), "-p", PROBES, *args], env
        )
        done = subprocess.run(
            command, capture_output=True, text=True, env=full_env, timeout=120, cwd=ROOT
        )
        return fleet_result(tmp_path, done.returncode, done.stdout, done.stderr)

    before = _states(drain_cluster)
    drained = run(sick[SICK], "--drain", "--yes")
    assert drained.returncode == 32, drained.stderr
    node = _node(drain_cluster, "gpu-02")
    assert node["State"] == "IDLE+DRAIN"
    assert node["Reason"].startswith("fleet: lab-02 GPU1 health-row-remap → reset-gpu, run ")
    assert "lab-x: lab-x is not a Slurm node here: not drained" in drained.stdout
    assert {n: s for n, s in _states(drain_cluster).items() if n != "gpu-02"} == {
        n: s for n, s in before.items() if n != "gpu-02"
    }

    resumed = run(healthy["gpu-01"], "--resume", "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _states(drain_cluster) == before
    assert "gpu-02: returned to service" in resumed.stdout
