"""Controller CPU and wall time of `fleet probe` for N nodes: one srun step vs N SSH connections.

    python3 bench/slurm_vs_ssh.py [N] [ROUNDS]      # default: 64 nodes, 3 rounds (alternating)

The same machine plays both fleets: a real Slurm cluster of N slurmd (tests/slurm/cluster.py) and N
real sshd on 127.2.0.x (tests/integration/sshd.py). Probes: system (cheap), so the numbers are the
transport's cost. Controller CPU is user+sys of `fleet` and its children: for Slurm that includes
srun (the step's I/O), not slurmctld/slurmd/slurmstepd (the cluster's side, on other machines in a
real cluster). Needs root, slurmd/slurmctld/munge and openssh-server (like CI).
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import FAKES, ROOT
from tests.integration.conftest import ssh_host, write_inventory
from tests.integration.sshd import SshdFarm, find_sshd
from tests.slurm.cluster import NodeStack, SlurmCluster

CAPTURE = ROOT / "tests" / "probes" / "golden" / "gpu" / "h200x2_nvlink"


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, controller CPU seconds (the command and its children), its summary line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = [line for line in done.stdout.splitlines() if " hosts: " in line]
    return wall, cpu, (summary[-1] if summary else done.stderr[-300:])


def fleet(*args: str) -> list[str]:
    return [sys.executable, "-m", "fleet", "probe", "-p", "system", "--no-save", *args]


def main(count: int, rounds: int) -> None:
    import os

    work = Path(tempfile.mkdtemp(prefix="fleet-bench-slurm-"))
    names = [f"n{i:03d}" for i in range(1, count + 1)]
    stub = FAKES / "stubs" / "torch_h200_symm"
    cluster = SlurmCluster(work / "slurm", {n: NodeStack(CAPTURE, stub) for n in names})
    sshd = find_sshd()
    assert sshd, "needs openssh-server"
    farm = SshdFarm(work / "sshd", sshd)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(work / "state")}
    try:
        cluster.start()
        for index, name in enumerate(names):
            farm.start(name, f"127.2.{index // 250}.{index % 250 + 1}")
        known = farm.known_hosts(work / "known_hosts", names)
        inventory = write_inventory(
            work / "inv.yaml", farm, {n: ssh_host(farm, n) for n in names}, known
        )
        slurm_env = {**env, "SLURM_CONF": str(cluster.conf)}
        results: dict[str, list[tuple[float, float, str]]] = {"slurm": [], "ssh": []}
        for _ in range(rounds):
            results["slurm"].append(timed(fleet("--slurm", "partition=gpu"), slurm_env))
            results["ssh"].append(timed(fleet("-i", str(inventory)), env))
        report(count, results)
    finally:
        farm.stop()
        cluster.stop()


def report(count: int, results: dict[str, list[tuple[float, float, str]]]) -> None:
    print(f"N={count} nodes, probes=system, {len(results['ssh'])} rounds (median):")
    for name, rows in results.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        print(f"  {name:5}  wall {wall:6.2f} s   controller CPU {cpu:6.2f} s   ({rows[-1][2]})")


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 64, int(sys.argv[2]) if len(sys.argv) > 2 else 3
    )
