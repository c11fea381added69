"""What the machine itself does to CPU time when more of its cores are busy (issue 49's bench).

bench/workers_scale.py compares fleet's CPU per host with one process (one fleet core busy, the rig
lightly) against the default (every fleet core and every rig core busy). A core's work costs more
CPU time when its neighbours are busy: a lower all-core clock, shared caches and memory, and on a
virtual machine two vCPUs that are threads of one physical core without the guest being told so.
This measures that apart from fleet: the same fixed piece of Python work (hashing, dicts, bytes,
as a controller's loop does), one process per CPU, each pinned, reaped with wait4 for its CPU:
alone on one fleet CPU, on every fleet CPU at once, and on every CPU (fleet's and the rig's) at
once. The ratios are the part of the workers' CPU-per-host ratio that no controller code can take
out. Then the first fleet CPU beside each other CPU, one pair at a time: a CPU that slows it far
more than the others is a hidden thread of its core (then pin such pairs on one side, e.g.
`--fleet-cpus 0-3,8-11 --rig-cpus 4-7,12-15`).

    python3 bench/cpu_calibration.py --fleet-cpus 0-7 --rig-cpus 8-15
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Collection, Sequence

WORK = """
import hashlib
table = {}
for i in range(ROUNDS):
    key = str(i).encode()
    table[key] = hashlib.sha256(key * 8).hexdigest()[:16]
    if len(table) > 4096:
        table.clear()
"""
ROUNDS = 400_000  # about 0.3-0.5 s of one core


def cpu_of_each(cpus: Collection[int], rounds: int = ROUNDS) -> dict[int, float]:
    """The same work at once on each of `cpus` (one process each): each one's CPU seconds."""
    code = WORK.replace("ROUNDS", str(rounds))
    own = os.sched_getaffinity(0)
    processes = []
    try:
        for cpu in sorted(cpus):
            os.sched_setaffinity(0, {cpu})
            processes.append(subprocess.Popen([sys.executable, "-S", "-c", code]))
    finally:
        os.sched_setaffinity(0, own)
    used = {}
    for cpu, process in zip(sorted(cpus), processes):
        _, _, usage = os.wait4(process.pid, 0)
        process.returncode = 0  # reaped here
        used[cpu] = usage.ru_utime + usage.ru_stime
    return used


def calibrate(fleet: Collection[int], rig: Collection[int]) -> list[str]:
    """Lines: the work's CPU alone, on every fleet CPU at once and on every CPU at once."""
    cpu_of_each([min(fleet)], ROUNDS // 10)  # warm the interpreter's files into the page cache
    first = min(fleet)
    alone = min(cpu_of_each([first])[first] for _ in range(2))
    lines = [f"calibration (the same Python work per process, CPU): alone {1000 * alone:.0f} ms"]
    for name, cpus in (("every fleet CPU busy", fleet), ("every CPU busy", {*fleet, *rig})):
        used = list(cpu_of_each(cpus).values())
        median = statistics.median(used)
        lines.append(f"  {name} ({len(cpus)}): median {1000 * median:.0f} ms, "
                     f"{median / alone:.2f}x alone (most {max(used) / alone:.2f}x)")  # fmt: skip
    lines.append(hidden_siblings(min(fleet), sorted({*fleet, *rig} - {min(fleet)})))
    return lines


def hidden_siblings(cpu: int, others: Sequence[int]) -> str:
    """`cpu`'s work beside each other CPU's, one pair at a time: a CPU that slows it far more
    than the rest is a thread of its physical core, whatever the topology the kernel was told
    (a virtual machine's vCPUs). The pinning's halves should then keep such pairs on one side."""
    rounds = ROUNDS // 4
    alone = min(cpu_of_each([cpu], rounds)[cpu] for _ in range(2))
    slowed = {other: cpu_of_each([cpu, other], rounds)[cpu] / alone for other in others}
    worst = max(slowed, key=slowed.__getitem__, default=None)
    pairs = " ".join(f"{other}:{ratio:.2f}" for other, ratio in slowed.items())
    return f"  CPU {cpu} beside each other CPU (x alone): {pairs}; most by CPU {worst}"


def main(argv: Sequence[str]) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cpu_sets import parse_cpus, split_cpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet-cpus")
    parser.add_argument("--rig-cpus")
    args = parser.parse_args(argv)
    fleet, rig, _ = split_cpus(os.sched_getaffinity(0))
    fleet = parse_cpus(args.fleet_cpus) if args.fleet_cpus else fleet
    rig = parse_cpus(args.rig_cpus) if args.rig_cpus else rig
    print("\n".join(calibrate(fleet, rig)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
