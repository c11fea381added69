"""CPU sets for the benches that pin processes (bench/workers_scale.py, bench/cpu_calibration.py):
read and written as taskset and /sys write them, and split in two by physical core."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

SIBLINGS = "/sys/devices/system/cpu/cpu{}/topology/thread_siblings_list"


def parse_cpus(text: str) -> frozenset[int]:
    """`0-3,8,10-11` (as taskset and /sys write CPU lists)."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def format_cpus(cpus: Collection[int]) -> str:
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def thread_siblings(cpu: int) -> frozenset[int]:
    """The logical CPUs that are threads of `cpu`'s physical core (itself where unknown)."""
    try:
        return parse_cpus(Path(SIBLINGS.format(cpu)).read_text()) | {cpu}
    except (OSError, ValueError):
        return frozenset({cpu})


def split_cpus(
    usable: Collection[int],
    siblings: Callable[[int], frozenset[int]] = thread_siblings,
    fleet_share: float = 0.5,
) -> tuple[frozenset[int], frozenset[int], str]:
    """Fleet on the lower `fleet_share` of the physical cores (half), the rig on the rest; by
    logical CPU where there is one physical core only. Each side gets at least one CPU."""
    if len(usable) < 2:
        raise SystemExit("pinning needs 2 usable CPUs: run with --unpinned")
    cores = sorted({frozenset(siblings(cpu) & set(usable)) for cpu in usable}, key=min)
    if len(cores) < 2:
        cores = [frozenset({cpu}) for cpu in sorted(usable)]
    cut = max(1, min(len(cores) - 1, int(len(cores) * fleet_share)))
    fleet, rig = frozenset().union(*cores[:cut]), frozenset().union(*cores[cut:])
    threads = max(len(core) for core in cores)
    split = (
        "in halves" if fleet_share == 0.5 else f"{cut} for fleet, {len(cores) - cut} for the rig"
    )
    return fleet, rig, f"{len(cores)} physical cores, {threads} thread(s) each, split {split}"


@contextmanager
def pinned(cpus: Collection[int] | None) -> Iterator[None]:
    """This process on `cpus` while what it starts inherits them (children keep the affinity
    they were forked with); back on its own CPUs after."""
    if cpus is None:
        yield
        return
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, own)
