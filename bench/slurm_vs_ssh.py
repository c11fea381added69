"""Controller CPU and wall time of `fleet probe` for N nodes: one srun step vs N SSH connections.

    python3 bench/slurm_vs_ssh.py [N] [ROUNDS] [--sshd K]   # default: 64 nodes, 3 rounds
    python3 bench/slurm_vs_ssh.py N --profile               # the Slurm run in-process, cProfile
    python3 bench/slurm_vs_ssh.py N ROUNDS --slurm-only     # no sshd, Slurm runs only
    python3 bench/slurm_vs_ssh.py N ROUNDS --timeout 600    # fleet's per-host deadline (120 s)
    python3 bench/slurm_vs_ssh.py N ROUNDS --nice-nodes     # the nodes' Pythons under nice 19

The same machine plays both fleets: a real Slurm cluster of N slurmd (tests/slurm/cluster.py) and N
real sshd on 127.2.0.x (tests/integration/sshd.py). With --sshd K, K real sshd serve the N SSH
inventory hosts under distinct names (several names per sshd, same address:port, host-key checking
on, as bench/side_by_side.py does): each host is still its own connection and session. Probes:
system (cheap), so the numbers are the transport's cost. Rounds alternate Slurm and SSH. Controller
CPU is user+sys of `fleet` and its children: for Slurm that includes srun (the step's I/O), not
slurmctld/slurmd/slurmstepd (the cluster's side, on other machines in a real cluster). Needs root,
slurmd/slurmctld/munge and openssh-server (like CI).

--nice-nodes runs every node's Python, of both fleets, under `nice -n 19` (an interpreter shim
first on the Slurm tasks' PATH; the SSH inventory's `python`):
with 1,024 nodes on 2 cores, the nodes' workload otherwise starves the daemons that play the nodes
(slurmd, slurmstepd, munged, sshd), which on real nodes have CPUs of their own, and their retries
(munge, RPCs resent) then show up in srun's CPU; fleet's CPU is counted the same either way.

fleet's own modules are byte-compiled first (compileall), as `pip install` leaves them: where
PYTHONDONTWRITEBYTECODE is set (this machine), a source checkout would otherwise compile them at
every start, a fixed ~0.1 s that no installed fleet pays.

--profile runs `fleet probe --slurm` in this process under cProfile (process_time clock) and splits
the controller's CPU into fleet's own and its children's (srun, sinfo). Every daemon is torn down
on every exit path.
"""

from __future__ import annotations

import argparse
import compileall
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.fleet_runs import write_inventory
from tests.integration.sshd import SshdFarm, find_sshd
from tests.paths import FAKES, ROOT
from tests.slurm.cluster import NodeStack, SlurmCluster

CAPTURE = ROOT / "tests" / "probes" / "golden" / "gpu" / "h200x2_nvlink"
NODES_IDLE_S = 600.0  # 1,024 slurmd registering on 2 cores take longer than the tests' 30 s
# 1,024 tasks starting Python on 2 cores starve the slurmd: with the tests' 30 s slurmctld sets
# hundreds of nodes DOWN mid-step (not responding) and kills the job.
SLURMD_TIMEOUT_S = 600
# One munged signs and checks every message of the N slurmd (a real cluster has one per node): with
# its default 2 threads, 1,024 nodes' launch replies and task exits fail ("Failed to connect to
# munge.socket: Resource temporarily unavailable", "If munged is up, restart with --num-threads").
MUNGE_THREADS = 32
# ... and Debian's munge 0.5.15 listens with a backlog of 256, its clients giving up at once when
# that queue is full (connect's EAGAIN is retried from 0.5.16 on): 1,024 nodes signing at once
# through one socket lose messages however many threads it has. One munged per this many nodes.
NODES_PER_MUNGED = 128


# `fleet probe` as `python -m fleet` runs it, which then says on stderr how much CPU its children
# (srun, sinfo) took: the controller's CPU split into fleet's own and theirs. (fleet's entry() ends
# with os._exit and no exit handlers, so the split is printed here, after every child is reaped.)
SPLIT_RUNNER = """
import os, resource, sys
from fleet.cli.root import main
code = 0
try:
    main.main(sys.argv[1:], prog_name="fleet")
except SystemExit as done:
    code = done.code if isinstance(done.code, int) else 1
sys.stdout.flush()
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print("bench-children-cpu", children.ru_utime + children.ru_stime, file=sys.stderr, flush=True)
os._exit(code)
"""
SPLIT_MARK = "bench-children-cpu "


class Timing(NamedTuple):
    wall: float
    cpu: float  # the command and all its children
    children: float | None  # its children only (srun, sinfo), when it says so (SPLIT_RUNNER)
    summary: str


def timed(argv: list[str], env: dict[str, str]) -> Timing:
    """Wall seconds, controller CPU seconds (the command and its children), its summary line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = [line for line in done.stdout.splitlines() if " hosts: " in line]
    split = [line for line in done.stderr.splitlines() if line.startswith(SPLIT_MARK)]
    children = float(split[-1][len(SPLIT_MARK) :]) if split else None
    return Timing(wall, cpu, children, summary[-1] if summary else done.stderr[-300:])


TIMEOUT = ["-t", "120"]  # fleet's default per-host deadline; --timeout S sets another


def fleet_args(*args: str) -> list[str]:
    return ["probe", "-p", "system", "--no-save", *TIMEOUT, *args]


def fleet(*args: str) -> list[str]:
    return [sys.executable, "-m", "fleet", *fleet_args(*args)]


def fleet_split(*args: str) -> list[str]:
    """`fleet probe ARGS`, which also reports its children's CPU (SPLIT_RUNNER)."""
    return [sys.executable, "-c", SPLIT_RUNNER, *fleet_args(*args)]


def new_cluster(work: Path, names: list[str], task_path: tuple[Path, ...] = ()) -> SlurmCluster:
    stub = FAKES / "stubs" / "torch_h200_symm"
    stacks = {n: NodeStack(CAPTURE, stub) for n in names}
    return SlurmCluster(
        work / "slurm",
        stacks,
        slurmd_timeout_s=SLURMD_TIMEOUT_S,
        munge_threads=MUNGE_THREADS,
        munge_daemons=max(1, len(names) // NODES_PER_MUNGED),
        task_path=task_path,
    )


def niced_pythons(folder: Path) -> tuple[Path, Path]:
    """--nice-nodes: a folder with a `python3` for the Slurm tasks' PATH, and a `python` for the
    SSH inventory, each the same interpreter as without the option under `nice -n 19`."""
    folder.mkdir(parents=True)
    node_python = shutil.which("python3")
    assert node_python, "the Slurm tasks run python3"
    shims = (folder / "python3", folder / "ssh-python")
    for shim, real in zip(shims, (node_python, sys.executable)):
        shim.write_text(f'#!/bin/sh\nexec nice -n 19 {real} "$@"\n')
        shim.chmod(0o755)
    return shims


def start_cluster(cluster: SlurmCluster) -> None:
    try:
        cluster.start()
    except RuntimeError:  # not idle within the tests' 30 s: a large cluster gets longer
        cluster.wait_for_nodes(NODES_IDLE_S)


def start_farm(farm: SshdFarm, names: list[str], sshds: int) -> dict[str, dict[str, object]]:
    """Start the sshd; each inventory name → its server's address and port."""
    if sshds >= len(names):
        for index, name in enumerate(names):
            farm.start(name, f"127.2.{index // 250}.{index % 250 + 1}")
        return {n: {"address": farm.hosts[n].address, "port": farm.hosts[n].port} for n in names}
    for index in range(sshds):
        farm.start(
            f"s{index:03d}",
            f"127.2.{index // 250}.{index % 250 + 1}",
            MaxStartups="1000:30:2000",
            MaxSessions="1000",
            LogLevel="INFO",
        )
    servers = list(farm.hosts.values())
    hosts = {}
    for index, name in enumerate(names):
        server = servers[index % sshds]
        hosts[name] = {"address": server.address, "port": server.port}
    return hosts


def main(count: int, rounds: int, sshds: int, ssh: bool = True, nice: bool = False) -> None:
    import os

    work = Path(tempfile.mkdtemp(prefix="fleet-bench-slurm-"))
    names = [f"n{i:04d}" for i in range(1, count + 1)]
    sshd = find_sshd()
    assert sshd, "needs openssh-server"
    farm = SshdFarm(work / "sshd", sshd)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(work / "state")}
    shims = niced_pythons(work / "nice") if nice else None
    cluster = new_cluster(work, names, (shims[0].parent,) if shims else ())
    try:
        start_cluster(cluster)
        hosts = start_farm(farm, names, sshds) if ssh else {}
        known = farm.known_hosts(work / "known_hosts")
        python = {"python": str(shims[1])} if shims else {}
        inventory = write_inventory(work / "inv.yaml", farm, hosts, known, **python)
        slurm_env = {**env, "SLURM_CONF": str(cluster.conf)}
        results: dict[str, list[Timing]] = {"slurm": [], "ssh": []}
        for _ in range(rounds):
            results["slurm"].append(timed(fleet_split("--slurm", "partition=gpu"), slurm_env))
            if ssh:
                results["ssh"].append(timed(fleet("-i", str(inventory)), env))
        report(count, min(sshds, count), results)
    finally:
        farm.stop()
        cluster.stop()  # what it started, also when start() failed part-way


def report(count: int, sshds: int, results: dict[str, list[Timing]]) -> None:
    rounds = len(results["slurm"])
    print(f"N={count} nodes ({sshds} sshd), probes=system, {rounds} rounds (median):")
    cpus = {}
    for name, rows in results.items():
        if not rows:
            continue
        wall = statistics.median(r.wall for r in rows)
        cpus[name] = cpu = statistics.median(r.cpu for r in rows)
        print(
            f"  {name:5}  wall {wall:6.2f} s   controller CPU {cpu:6.2f} s"
            f"  = {cpu / count * 1000:5.2f} ms/node   ({rows[-1].summary})"
        )
        print(f"         each round: {', '.join(f'{r.cpu:.2f} s' for r in rows)}")
        known = [r.children for r in rows if r.children is not None]
        if known:
            children = statistics.median(known)
            print(
                f"         of which children (srun, sinfo) {children:.2f} s"
                f" = {children / count * 1000:5.2f} ms/node, fleet itself"
                f" {(cpu - children) / count * 1000:5.2f} ms/node"
            )
    if "ssh" in cpus:
        print(f"  CPU per node, slurm/ssh: {cpus['slurm'] / cpus['ssh']:.2f}")


def profile(count: int, nice: bool = False) -> None:
    """`fleet probe --slurm` in this process under cProfile; fleet's CPU and its children's."""
    import cProfile
    import os
    import pstats

    from fleet.cli.root import main as fleet_main

    work = Path(tempfile.mkdtemp(prefix="fleet-bench-slurm-"))
    names = [f"n{i:04d}" for i in range(1, count + 1)]
    shims = niced_pythons(work / "nice") if nice else None
    cluster = new_cluster(work, names, (shims[0].parent,) if shims else ())
    try:
        start_cluster(cluster)
        os.environ.update(SLURM_CONF=str(cluster.conf), XDG_STATE_HOME=str(work / "state"))
        profiler = cProfile.Profile(time.process_time)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        own, started = time.process_time(), time.perf_counter()
        profiler.enable()
        try:
            fleet_main(fleet_args("--slurm", "partition=gpu"), standalone_mode=False)
        except SystemExit:
            pass
        finally:
            profiler.disable()
        wall, own = time.perf_counter() - started, time.process_time() - own
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        children = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(
            f"N={count}: wall {wall:.2f} s; fleet in-process CPU {own:.2f} s, children "
            f"(srun, sinfo) {children:.2f} s"
        )
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    finally:
        cluster.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=64, help="nodes N (64)")
    parser.add_argument("rounds", nargs="?", type=int, default=3, help="rounds (3)")
    parser.add_argument("--sshd", type=int, default=0, help="K sshd serve the N hosts (0: N)")
    parser.add_argument("--profile", action="store_true", help="profile the Slurm run only")
    parser.add_argument("--slurm-only", action="store_true", help="no sshd, no SSH runs")
    parser.add_argument("--timeout", type=float, default=120.0, help="fleet's -t, per host (120)")
    parser.add_argument("--nice-nodes", action="store_true", help="nodes' Pythons under nice 19")
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "fleet", quiet=1)  # as installed: see the module docstring
    TIMEOUT[1] = str(args.timeout)
    if args.profile:
        profile(args.count, nice=args.nice_nodes)
    else:
        main(
            args.count,
            args.rounds,
            args.sshd or args.count,
            ssh=not args.slurm_only,
            nice=args.nice_nodes,
        )
