"""The diff at fleet scale: 1,000 synthetic hosts built from the real 2×H200 run document, and a
1,000-host mixed fleet built from the recorded mixed loopback run.

    python3 bench/diff_scale.py [HOSTS]        # default 1000

Uniform: each host is the real H200 host with its own hostname, GPU UUIDs and jittered allreduce
timings; two hosts are odd (another torch, NCCL_P2P_DISABLE=1) and one is 3× slow. Prints the time
to save (content-addressed), the file size, the time to load, to diff across hosts, and to diff two
runs (drift), and the peak memory of the process. Synthetic documents, real probe payloads.

Mixed (tests/mixed_fleets.py): a quarter 2× H200, the rest 8× RTX PRO 6000 Blackwell, each host
with its own hostname and GPU UUIDs, 2 without sm_120 and 2 with NCCL_P2P_DISABLE=1: the diff
with its cohorts and ranked findings. Each diff is timed 5 times (wall, and this process's CPU:
the machine is shared), after a save and load as `fleet diff RUN` would read it.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fleet.analysis.across_hosts.diff import compare_hosts  # noqa: E402
from fleet.analysis.across_runs.drift import compare_runs  # noqa: E402
from fleet.analysis.facts import declared_facts  # noqa: E402
from fleet.models import Run  # noqa: E402
from fleet.store import read_run_file as load_run  # noqa: E402
from fleet.store import save_run  # noqa: E402
from tests.mixed_fleets import mixed_fleet  # noqa: E402

REAL = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x2_run.json"


def synthetic_document(count: int, seed: int = 1) -> dict:
    rng = random.Random(seed)
    real = json.loads(REAL.read_text())
    template = real["hosts"]["local"]
    hosts = {}
    for index in range(count):
        name = f"gpu-{index:04d}"
        host = copy.deepcopy(template)
        host["probes"]["system"]["data"]["hostname"] = name
        for gpu in host["probes"]["gpu"]["data"]["gpus"]:
            gpu["uuid"] = f"GPU-{index:04d}-{gpu['index']}"
        for row in host["probes"]["allreduce"]["data"]["results"]:
            jitter = rng.uniform(0.95, 1.05) * (3.0 if index == 5 else 1.0)
            row["latency_us"] *= jitter
            row["busbw_gbps"] /= jitter
        hosts[name] = host
    hosts["gpu-0007"]["probes"]["torch"]["data"]["version"] = "2.9.1+cu128"
    hosts["gpu-0008"]["probes"]["nccl"]["data"]["env"]["NCCL_P2P_DISABLE"] = "1"
    return {**real, "hosts": hosts}


def timed(label: str, action):
    started = time.perf_counter()
    result = action()
    print(f"{label:38s} {time.perf_counter() - started:7.3f} s")
    return result


def timed_best(label: str, action, runs: int = 5):
    """The best of `runs`: wall and CPU seconds (the CPU of a shared machine's busy moments
    counts less against the code than the wall)."""
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    print(f"{label:38s} {min(walls):7.3f} s wall, {min(cpus):.3f} s CPU (best of {runs})")
    return result


def mixed(count: int, declarations) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = load_run(save_run(Run.from_dict(mixed_fleet(count)), Path(tmp)))
    diff = timed_best(
        f"mixed: cross-host diff of {count} hosts",
        lambda: compare_hosts(run.hosts.values(), declarations),
    )
    print(
        f"{'mixed: cohorts':38s} {', '.join(f'{c.short} ({len(c.hosts)})' for c in diff.cohorts)}"
    )
    print(f"{'mixed: odd hosts found':38s} {', '.join(diff.odd_hosts)}")
    kinds = [f"{f.kind}" for f in diff.findings]
    print(f"{'mixed: findings, ranked':38s} {', '.join(kinds)}")
    print(f"{'mixed: differing facts':38s} {len(diff.values) + len(diff.sets)}")


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    declarations = declared_facts()
    document = synthetic_document(count)
    run = Run.from_dict(document)
    with tempfile.TemporaryDirectory() as tmp:
        path = timed(
            f"save {count} hosts (content-addressed)", functools.partial(save_run, run, Path(tmp))
        )
        plain = len(json.dumps(document))
        print(
            f"{'run file size':38s} {path.stat().st_size / 1e6:7.2f} MB "
            f"(plain JSON {plain / 1e6:.1f} MB)"
        )
        del document, run
        loaded = timed("load", lambda: load_run(path))
        second = Run.from_dict(
            {**synthetic_document(count, seed=2), "started": "2026-11-30T03:00:00.000Z"}
        )
        other = load_run(save_run(second, Path(tmp)))
        del second
    diff = timed_best(
        f"cross-host diff of {count} hosts",
        lambda: compare_hosts(loaded.hosts.values(), declarations),
    )
    print(f"{'odd hosts found':38s} {', '.join(diff.odd_hosts)}")
    drift = timed(
        f"drift between two {count}-host runs", lambda: compare_runs(loaded, other, declarations)
    )
    print(f"{'hosts with drift':38s} {len(drift.changed_hosts)}")
    mixed(count, declarations)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'peak RSS of this process':38s} {peak:7.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
