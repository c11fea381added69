"""Where a `fleet probe` run's wall goes, for bench/workers_scale.py (issue 49).

Two sources, both cheap:

- /proc, sampled every SAMPLE_S by a thread of the bench: the CPU (utime+stime) of every rig server
  process and of fleet's process tree (fleet, its seed, each worker; found through
  /proc/PID/task/*/children). Per process: its CPU over the run, and a strip of ten digits, its
  use of one core in each tenth of the run (0: idle .. 9: 90 % or more), so that a rig process
  busy while the others idle, or workers waiting on a saturated rig, show at a glance.
- FLEET_WORKER_TIMELINE (fleet/execution/timeline.py): each fan-out process's line (its start,
  its hosts' finishing times, its hosts' time queued for a handshake slot, in the handshake, in
  all, and its CPU), the seed's (its start, when it forked), the parent's (when its seed started,
  when each outcome reached it). Every stamp is time.monotonic(), put on the run's start here.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAMPLE_S = 0.05
TICKS = os.sysconf("SC_CLK_TCK")
SLICES = 10
CURVE = (0.1, 0.5, 0.9, 1.0)


def cpu_ticks(pid: int) -> int | None:
    """utime+stime of `pid` in clock ticks (fields 14 and 15 of proc(5)); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])


def children(pid: int) -> list[int]:
    """`pid`'s children, whichever of its threads started them."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in task.read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def process_tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children(current)
    return found


@dataclass
class Sampler:
    """A thread that samples the CPU of the rig's processes and of fleet's process tree."""

    rig: Sequence[int]
    fleet: int | None = None
    samples: list[tuple[float, dict[int, int]]] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)  # every process of fleet's tree ever sampled
    stopped: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self, fleet: int) -> None:
        self.fleet = fleet
        self.sample()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        tree = process_tree(self.fleet) if self.fleet else []
        self.seen.update(tree)
        pids = [*self.rig, *tree]
        ticks = {pid: t for pid in pids if (t := cpu_ticks(pid)) is not None}
        self.samples.append((time.monotonic(), ticks))

    def stop(self, fleet_at_exit: int | None = None) -> None:
        """Stop sampling; `fleet_at_exit`: fleet's own ticks, read once it exited (a zombie)."""
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()
        self.sample()
        if fleet_at_exit is not None and self.fleet is not None:
            self.samples[-1][1][self.fleet] = fleet_at_exit

    def cpu_s(self, pid: int) -> float:
        seen = [ticks[pid] for _, ticks in self.samples if pid in ticks]
        return (seen[-1] - seen[0]) / TICKS if seen else 0.0

    def strip(self, pid: int, start: float, end: float) -> str:
        """`pid`'s use of one core in each tenth of start..end, one digit each."""
        busy, spans = [0.0] * SLICES, (end - start) / SLICES or 1.0
        pairs = zip(self.samples, self.samples[1:])
        for (t0, before), (t1, after) in pairs:
            if pid in after:
                used = (after[pid] - before.get(pid, after[pid])) / TICKS
                where = min(SLICES - 1, max(0, int(((t0 + t1) / 2 - start) / spans)))
                busy[where] += used
        return "".join(str(min(9, int(10 * b / spans))) for b in busy)


def load_timeline(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def completion_curve(finished: Iterable[float], start: float) -> str:
    times = sorted(t - start for t in finished)
    if not times:
        return "no host finished"
    points = [times[max(0, round(share * len(times)) - 1)] for share in CURVE]
    return "  ".join(f"{int(100 * s)}%: {t:.2f} s" for s, t in zip(CURVE, points))


def means(record: Mapping[str, Any]) -> str:
    hosts = max(1, int(record.get("hosts") or len(record["finished"])))
    waits = record.get("waits_s", {})
    per = {what: 1000 * float(waits.get(what, 0.0)) / hosts for what in ("queued", "handshake")}
    whole = 1000 * float(waits.get("host", 0.0)) / hosts
    session = whole - per["queued"] - per["handshake"]
    sleeps = float(record.get("sleeps", 0)) / hosts
    return (f"per host: queued {per['queued']:.0f} ms, handshake {per['handshake']:.0f} ms, "
            f"session {session:.0f} ms (handshakes <= {record.get('handshakes')} at once); "
            f"{sleeps:.1f} sleeps, {record.get('preempted', 0)} preempted in all")  # fmt: skip


def span(record: Mapping[str, Any], start: float) -> str:
    done = record["finished"]
    first, last = (f"{min(done) - start:.2f}", f"{max(done) - start:.2f}") if done else ("-", "-")
    return (f"start {record['started'] - start:.2f} s, first host {first} s, "
            f"last host {last} s, {len(done)} hosts")  # fmt: skip


def explain(
    records: Sequence[Mapping[str, Any]],
    sampler: Sampler,
    fleet_pid: int,
    start: float,
    end: float,
) -> list[str]:
    """The run's lines: the rig's CPU, the parent's, the seed's and each worker's, and the curve."""
    lines = rig_lines(sampler, start, end)
    relay = [r for r in records if r["role"] == "relay"]
    fanouts = [r for r in records if r["role"] == "fanout"]
    parent = relay[0] if relay else next((r for r in fanouts if r["pid"] == fleet_pid), None)
    fleet_cpu = sampler.cpu_s(fleet_pid)
    lines.append(f"    fleet parent: CPU {fleet_cpu:.2f} s  {sampler.strip(fleet_pid, start, end)}")
    if parent is not None:
        tail = end - max(parent["finished"], default=end)
        lines.append(f"      hosts done (as the parent saw them): "
                     f"{completion_curve(parent['finished'], start)}; exit {tail:.2f} s after "
                     "the last")  # fmt: skip
        if parent["role"] == "fanout":
            lines.append(f"      {means(parent)}")
        else:
            marks = ", ".join(f"{k} {v - start:.2f} s" for k, v in parent["marks"].items()
                              if not k.endswith("_ended"))  # fmt: skip
            relay_cpu = loop_cpu_s(parent)
            lines.append(f"      {marks}")
            lines.append(f"      relay (its loop: starting the seed, reading the streams): CPU "
                         f"{relay_cpu:.2f} s, {1000 * relay_cpu / max(1, parent['hosts']):.2f} ms/host, "
                         f"{parent.get('sleeps')} sleeps")  # fmt: skip
    lines += worker_lines(records, sampler, start, end, fleet_pid)
    lines.append(host_phase_cpu(fanouts))
    return lines


def fanout_cpu_s(records: Sequence[Mapping[str, Any]]) -> float:
    """The CPU of the fan-outs themselves (from their first host to their last, each process's
    start and fixed costs left out): per host, the figure to hold one process against workers."""
    fanouts = [r for r in records if r["role"] == "fanout"]
    return sum(loop_cpu_s(r) for r in fanouts)


def loop_cpu_s(record: Mapping[str, Any]) -> float:
    """From the record's start to its end, its event loop's thread's CPU (other threads apart:
    the rule pack read meanwhile is the same work with or without workers)."""
    if "loop_cpu_s" in record:
        return float(record["loop_cpu_s"])
    return float(record["cpu_s"]) - float(record.get("cpu_s_before", 0.0))


def host_phase_cpu(fanouts: Sequence[Mapping[str, Any]]) -> str:
    cpu = fanout_cpu_s(fanouts)
    hosts = sum(int(r.get("hosts") or 0) for r in fanouts) or 1
    return (f"    the fan-outs' own CPU: {cpu:.2f} s, {1000 * cpu / hosts:.2f} ms/host "
            f"over {len(fanouts)} process(es)")  # fmt: skip


def rig_lines(sampler: Sampler, start: float, end: float) -> list[str]:
    used = [sampler.cpu_s(pid) for pid in sampler.rig]
    lines = [f"    rig: CPU {sum(used):.2f} s over {len(used)} processes "
             f"(least {min(used, default=0):.2f} s, most {max(used, default=0):.2f} s)"]  # fmt: skip
    for pid, cpu in zip(sampler.rig, used):
        lines.append(f"      rig pid {pid:>7}: CPU {cpu:5.2f} s  {sampler.strip(pid, start, end)}")
    return lines


def worker_lines(
    records: Sequence[Mapping[str, Any]],
    sampler: Sampler,
    start: float,
    end: float,
    fleet_pid: int,
) -> list[str]:
    seeds = [r for r in records if r["role"] == "seed"]
    lines = []
    for seed in seeds:
        forking = seed["marks"].get("forking", seed["ended"])
        lines.append(f"    seed pid {seed['pid']}: start {seed['started'] - start:.2f} s, forked "
                     f"{forking - start:.2f} s, CPU to then {seed['cpu_s']:.2f} s")  # fmt: skip
    relay = next((r for r in records if r["role"] == "relay"), None)
    index = {int(pid): int(i) for i, pid in (relay or {}).get("workers", {}).items() if pid}
    workers = [r for r in records if r["role"] == "fanout" and r["pid"] != fleet_pid]
    for record in sorted(workers, key=lambda r: index.get(r["pid"], r["pid"])):
        name = f"worker {index.get(record['pid'], '?')}"
        lines.append(f"    {name:>9}: CPU {record['cpu_s']:.2f} s  "
                     f"{sampler.strip(record['pid'], start, end)}  {span(record, start)}")  # fmt: skip
        lines.append(f"{'':15}{means(record)}")
    return lines
