"""The `--workers 1` reference at the default run's load, for workers_scale.py (issue 49).

The plain CPU-per-host ratio holds the default run (every fleet CPU busy with a worker, every rig
CPU busy serving them) against `--workers 1` alone (one fleet CPU busy, the rig lightly). On the
lent virtual machines the same fixed Python work costs 1.1-1.8x more CPU time with the cores busy
(cpu_calibration.py: shared physical cores the guest is not told of, the all-core clock, shared
caches), so that ratio counts the machine as well as fleet. Here the reference runs at the same
load: as many `fleet probe --workers 1` over the whole rig inventory at once as the default run
has workers, on the same fleet CPUs, against the same rig. Each copy is today's single process
doing the work of one worker at the occupancy the workers run at; their CPU per host (the median
copy) is what the default's is held against, so what remains of the ratio is what spreading over
processes costs (the seed, the forks, the relay, the parent's document and judging), not the
machine. The copies' run documents must equal the single process's apart from timings.

Beside it, from the default run's own timeline: one worker's CPU per host (the median worker: its
CPU from its fork to its last host, over its hosts), the controller's whole CPU per host held
against the work one of its own workers does in the same run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_sets import pinned
from workers_timeline import fanout_cpu_s, load_timeline

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Together:
    """`copies` runs of `fleet probe --workers 1` started at once: each one's CPU and wall."""

    label: str
    cpu_s: tuple[float, ...]  # user+sys of each copy's process tree (wait4)
    wall_s: tuple[float, ...]
    fanouts_s: tuple[float, ...]  # of each, its fan-out's own CPU (its timeline)
    exit_codes: tuple[int, ...]
    documents: tuple[Path, ...]

    def ms_per_host(self, hosts: int) -> float:
        """The median copy's controller CPU per host."""
        return 1000 * statistics.median(self.cpu_s) / hosts

    def line(self, hosts: int) -> str:
        cpus = " ".join(f"{c:.2f}" for c in self.cpu_s)
        return (f"  {self.label:10} {len(self.cpu_s)} x --workers 1 at once: walls "
                f"{min(self.wall_s):.2f}-{max(self.wall_s):.2f} s, CPU {cpus} s, median "
                f"{self.ms_per_host(hosts):.2f} ms/host, exits {sorted(set(self.exit_codes))}")  # fmt: skip


def run_together(
    inventory: Path,
    workdir: Path,
    label: str,
    copies: int,
    cpus: Collection[int] | None,
) -> Together:
    """`copies` single-process runs of the whole inventory at once on `cpus` (each may run on
    any of them, as the default run's workers may), each reaped with wait4 for its CPU."""
    started, processes, outs, timelines = time.monotonic(), [], [], []
    with pinned(cpus):
        for copy in range(copies):
            out, timeline = workdir / f"{label}-{copy}.json", workdir / f"{label}-{copy}.timeline"
            state = workdir / f"state-{copy}"
            command, env = probe_command(inventory, out, ["--workers", "1"], state, timeline)
            processes.append(subprocess.Popen(command, env=env, cwd=workdir,
                                              stdout=subprocess.DEVNULL))  # fmt: skip
            outs.append(out)
            timelines.append(timeline)
    cpu, wall, codes = [], [], []
    for process in processes:
        _, status, usage = os.wait4(process.pid, 0)
        wall.append(time.monotonic() - started)
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        codes.append(process.returncode)
        cpu.append(usage.ru_utime + usage.ru_stime)
    fanouts = tuple(fanout_cpu_s(load_timeline(path)) for path in timelines)
    return Together(label, tuple(cpu), tuple(wall), fanouts, tuple(codes), tuple(outs))


def probe_command(
    inventory: Path,
    out: Path,
    extra: Sequence[str],
    state: Path,
    timeline: Path | None = None,
) -> tuple[list[str], dict[str, str]]:
    """`fleet probe -p system` of `inventory` as the benches run it (this checkout's fleet, the
    run to `out` and not saved, its state in `state`), and its environment; `timeline`: where
    fleet writes its stamps (FLEET_WORKER_TIMELINE)."""
    command = [sys.executable, "-m", "fleet", "probe", "-i", str(inventory), "-p", "system",
               "--no-save", "--json", str(out), *extra]  # fmt: skip
    env = {**os.environ, "XDG_STATE_HOME": str(state), "PYTHONPATH": str(ROOT)}
    if timeline is not None:
        env["FLEET_WORKER_TIMELINE"] = str(timeline)
    return command, env


def worker_ms_per_host(records: Sequence[Mapping[str, Any]]) -> float | None:
    """In a run over workers (its timeline has a relay), the median worker's CPU per host: its
    process's CPU from its fork to its last host (a forked child's usage starts at zero) over
    its hosts. None for a single-process run."""
    if not any(r["role"] == "relay" for r in records):
        return None
    per_host = [1000 * float(r["cpu_s"]) / int(r["hosts"])
                for r in records if r["role"] == "fanout" and int(r.get("hosts") or 0)]  # fmt: skip
    return statistics.median(per_host) if per_host else None


def least_median(runs: Sequence[Together], hosts: int) -> float:
    """Of the rounds, the least median-copy CPU per host (as the other figures take the least)."""
    return min(run.ms_per_host(hosts) for run in runs)
