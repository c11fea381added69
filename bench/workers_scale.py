"""`fleet probe` with one worker and with the default (one per core): wall and controller CPU.

    python3 bench/workers_scale.py --hosts 2000            # the issue 49 figure (16+ cores)
    python3 bench/workers_scale.py --hosts 50 --workers 2  # a small check on a small machine
    python3 bench/workers_scale.py --hosts 2000 --unpinned # rig and fleet share every core

Fleet and the rig run on disjoint CPU sets (sched_setaffinity, inherited by every process they
start): by default the rig on the upper half of the usable cores, fleet on the lower half, split
by physical core where the kernel says which logical CPUs are threads of one core (two threads of
one core slow each other down: the rig on one and a worker on the other would inflate the
worker's CPU as much as sharing the core outright). Real hosts never share the controller's
cores, so this measures the controller, not the contention. Fleet's default worker count follows
the cores it may use (fleet.execution.limits.usable_cores reads the affinity): one per core of
its half. `--fleet-cpus`/`--rig-cpus` choose the sets (`0-7`, `0,2,4`); `--unpinned` runs both
on every core, as before.

Starts the asyncssh rig (bench/asyncssh_rig.py: its hosts replay one real run of `-p system`,
so the figure is the controller's), records that run once (one host, not measured), then runs
`python -m fleet probe -i RIG -p system --no-save --json FILE` with `--workers 1` and with the
default (or --workers N), `--rounds` times each, alternating. Per run: wall, and the controller's
CPU: user+sys of the fleet process and every process under it (its seed and workers are reaped
inside the tree, so wait4 on fleet counts them), its kernel part, and fleet's own process apart
(/proc/PID/stat of the exited process before it is reaped). Each round then runs the reference
at the default's load (bench/workers_loaded.py: as many `--workers 1` copies at once as the default
has workers, on the same CPUs, against the same rig), unless --no-loaded. Prints each run, then
the best wall of each, the least CPU per host (ms) of each, the wall ratio (target <= 0.3x), the
CPU per host ratio against --workers 1 alone and against it at the same load (target <= 1.2x:
the verdict takes the latter, since the former also counts what the machine does to CPU time
with its cores busy), one worker's own CPU per host in the default run, and whether the run
documents are equal apart from timings (started, finished, elapsed_s) and the file they name.
Needs only what `pip install .` brings; no pytest, no sshd.

Where each run's wall went (bench/workers_timeline.py): the rig's CPU over the run, in all and per
server process, and fleet's parent's, seed's and each worker's, each with a strip of ten digits
(its use of one core in each tenth of the run, 9: >= 90 %); each worker's span (its start, its
first and last host done, from fleet's start) and its hosts' mean time queued for a handshake
slot, in the handshake and in the session; the parent's curve of hosts done (10/50/90/100 %) and
how long it ran after the last. Fleet writes its stamps where FLEET_WORKER_TIMELINE says.
Pinned, it first prints what the machine itself does to CPU time with more cores busy
(bench/cpu_calibration.py): the part of the CPU-per-host ratio no controller code can take out.

    python3 bench/workers_scale.py --quick       # one device call: 2,000 hosts, 2 rounds, then
                                                 # one round with the rig on 5/8 of the cores
    python3 bench/workers_scale.py --quick --more-rig 0-5/6-15
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from asyncssh_rig import Rig, host_name, start_rig
from cpu_calibration import calibrate
from cpu_sets import format_cpus, parse_cpus, pinned, split_cpus
from workers_loaded import (
    Together,
    least_median,
    probe_command,
    run_together,
    worker_ms_per_host,
)
from workers_timeline import TICKS, Sampler, explain, fanout_cpu_s, load_timeline

from fleet.execution.workers import worker_count
from tests.integration.fleet_runs import without_timings

WALL_TARGET, CPU_TARGET = 0.3, 1.2


# ------------------------------------------------------------------------------ CPU sets


@dataclass(frozen=True)
class CpuPlan:
    """Where each side runs: None for unpinned (every usable core)."""

    fleet: frozenset[int] | None
    rig: frozenset[int] | None
    note: str


def plan_cpus(args: argparse.Namespace) -> CpuPlan:
    if args.unpinned:
        return CpuPlan(None, None, "unpinned: rig and fleet share every usable core")
    usable = os.sched_getaffinity(0)
    fleet, rig, note = split_cpus(usable)
    if args.fleet_cpus or args.rig_cpus:
        fleet = parse_cpus(args.fleet_cpus) if args.fleet_cpus else frozenset(usable) - rig
        rig = parse_cpus(args.rig_cpus) if args.rig_cpus else frozenset(usable) - fleet
        note = "as given"
    if not fleet or not rig or fleet & rig:
        raise SystemExit(f"fleet CPUs {format_cpus(fleet)} and rig CPUs {format_cpus(rig)} "
                         "must be non-empty and disjoint")  # fmt: skip
    return CpuPlan(fleet, rig, note)


# ------------------------------------------------------------------------------ the runs


@dataclass(frozen=True)
class Measure:
    label: str
    wall_s: float
    cpu_s: float  # user+sys of fleet's whole process tree
    sys_s: float  # of which in the kernel (forks, pipes, page faults, epoll)
    own_cpu_s: float | None  # of which fleet's own process (the rest: its seed and workers)
    exit_code: int
    document: Path
    details: tuple[str, ...] = ()  # where the wall went (workers_timeline.explain)
    switches: tuple[int, int] = (0, 0)  # the tree's sleeps, preemptions (context switches)
    fanout_cpu_s: float | None = None  # of `cpu_s`, the fan-outs' own (timeline; None: no rig)
    worker_ms: float | None = None  # the median worker's own CPU per host (None: one process)

    def line(self) -> str:
        sleeps, preempted = self.switches
        parts = f"sys {self.sys_s:.2f} s, {sleeps} sleeps, {preempted} preempted"
        if self.own_cpu_s is not None:
            rest = self.cpu_s - self.own_cpu_s
            parts += f", fleet process {self.own_cpu_s:.2f} s, seed and workers {rest:.2f} s"
        head = (f"  {self.label:10} wall {self.wall_s:7.2f} s  CPU {self.cpu_s:7.2f} s "
                f"({parts})  exit {self.exit_code}")  # fmt: skip
        return "\n".join([head, *self.details])


def run_fleet(
    inventory: Path,
    workdir: Path,
    label: str,
    extra: Sequence[str],
    cpus: Collection[int] | None,
    rig: Rig | None = None,
) -> Measure:
    """One `fleet probe` on `cpus`, reaped with wait4: its wall and its process tree's CPU; with
    `rig`, where the wall went (the rig's and fleet's processes sampled, fleet's timeline)."""
    out, timeline = workdir / f"{label}.json", workdir / f"{label}.timeline"
    command, env = probe_command(inventory, out, extra, workdir / "state", timeline)
    sampler = Sampler([server.pid for server in rig.servers] if rig else [])
    started = time.monotonic()
    with pinned(cpus):
        process = subprocess.Popen(command, env=env, cwd=workdir, stdout=subprocess.DEVNULL)
    sampler.start(process.pid)
    own = own_cpu_at_exit(process.pid)
    ended = time.monotonic()
    sampler.stop(None if own is None else round(own * TICKS))
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    cpu = usage.ru_utime + usage.ru_stime
    records = load_timeline(timeline)
    details = explain(records, sampler, process.pid, started, ended) if rig else []
    switches = (usage.ru_nvcsw, usage.ru_nivcsw)
    code = process.returncode
    fanouts = fanout_cpu_s(records) if records else None
    worker = worker_ms_per_host(records)
    return Measure(
        label, wall, cpu, usage.ru_stime, own, code, out, tuple(details), switches, fanouts, worker
    )


def own_cpu_at_exit(pid: int) -> float | None:
    """Once `pid` has exited but before it is reaped: its own CPU, apart from its children's
    (/proc/PID/stat's utime and stime; None where there is no /proc)."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # a zombie keeps its accounting
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Rounds:
    """A configuration's runs: each round's --workers 1, default and (unless --no-loaded) the
    --workers 1 copies at the default's load (workers_loaded.py)."""

    runs: list[Measure]
    loaded: list[Together]


def measure(
    args: argparse.Namespace, workdir: Path, plan: CpuPlan, rounds: int, name: str = "rig"
) -> Rounds:
    """`rounds` of --workers 1, the default and the loaded reference, in turn, on one rig."""
    procs = args.rig_procs or (len(plan.rig) if plan.rig else max(1, (os.cpu_count() or 2) // 2))
    workers = say_plan(args, plan, procs)
    started = time.monotonic()
    with pinned(plan.rig):
        rig_started = start_rig(workdir / name, args.hosts, procs)
    with rig_started as rig:
        print(f"rig: {args.hosts} hosts in {procs} processes ({time.monotonic() - started:.1f} s)")
        first = ["-l", host_name(0), "--workers", "1"]
        record = run_fleet(rig.inventory, workdir, f"{name}-record", first, plan.fleet)
        assert record.exit_code == 0, f"recording the rig's answer failed: exit {record.exit_code}"
        spread = ["--workers", str(args.workers)] if args.workers else []
        runs, loaded = [], []
        for round_ in range(rounds):
            prefix = "" if name == "rig" else f"{name}-"
            for label, extra in (("one", ["--workers", "1"]), ("spread", spread)):
                done = run_fleet(rig.inventory, workdir, f"{label}-{prefix}{round_}", extra,
                                 plan.fleet, rig)  # fmt: skip
                print(done.line(), flush=True)
                runs.append(done)
            if not args.no_loaded and workers > 1:
                together = run_together(rig.inventory, workdir, f"loaded-{prefix}{round_}",
                                        workers, plan.fleet)  # fmt: skip
                print(together.line(args.hosts), flush=True)
                loaded.append(together)
        if args.ctrl_c_after and name == "rig":
            interrupted_run(rig, workdir, spread, plan.fleet, args.ctrl_c_after)
    return Rounds(runs, loaded)


def interrupted_run(
    rig: Rig, workdir: Path, extra: Sequence[str], cpus: Collection[int] | None, after_s: float
) -> bool:
    """Ctrl-C (SIGINT to fleet, as its loop takes it) `after_s` into a run: its exit code (130),
    how long it took to end, its hosts' statuses, and any process of its tree still there."""
    out = workdir / "interrupted.json"
    command, env = probe_command(rig.inventory, out, extra, workdir / "state")
    with pinned(cpus):
        process = subprocess.Popen(command, env=env, cwd=workdir,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    sampler = Sampler([])
    sampler.start(process.pid)
    time.sleep(after_s)
    process.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    code = process.wait(60)
    took = time.monotonic() - signalled
    sampler.stop()
    time.sleep(0.5)  # the seed reaps its workers as fleet ends: give the kernel a moment
    left = sorted(pid for pid in sampler.seen - {process.pid} if still_running(pid))
    statuses = Counter(str(h.get("status")) for h in document_hosts(out))
    print(f"Ctrl-C after {after_s:g} s: exit {code} after {took:.2f} s; hosts "
          f"{dict(statuses) or 'none written'}; {len(sampler.seen) - 1} processes under fleet "
          f"seen, still running: {left or 'none'}")  # fmt: skip
    return code == 130 and not left


def still_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def document_hosts(path: Path) -> list[dict[str, object]]:
    try:
        return list(json.loads(path.read_text())["hosts"].values())
    except (OSError, ValueError, KeyError):
        return []


def where(cpus: Collection[int] | None) -> str:
    return f"CPUs {format_cpus(cpus)}" if cpus else "every usable CPU"


def say_plan(args: argparse.Namespace, plan: CpuPlan, procs: int) -> int:
    """The CPU sets and worker counts, so that a figure says what it measured; the count."""
    fleet_cores = len(plan.fleet) if plan.fleet else len(os.sched_getaffinity(0))
    workers = args.workers or worker_count(None, args.hosts, cores=fleet_cores)
    print(f"CPU sets: {plan.note}")
    print(f"  fleet: {where(plan.fleet)} ({fleet_cores}); workers: 1 and "
          f"{workers} ({'--workers' if args.workers else 'the default'})")  # fmt: skip
    print(f"  rig:   {where(plan.rig)}; {procs} server processes")
    return workers


def report(rounds: Rounds, hosts: int, spread_name: str) -> bool:
    """Best of the rounds, each figure apart: the least wall and the least CPU of each kind
    (on a busy machine the quickest run is not always the one least slowed by others). The CPU
    verdict holds the default against --workers 1 at the same load where that ran (the plain
    ratio against --workers 1 alone counts the machine's contention too: workers_loaded.py)."""
    runs = rounds.runs
    ones = [r for r in runs if r.label.startswith("one")]
    spreads = [r for r in runs if r.label.startswith("spread")]
    one, spread = (min(kind, key=lambda r: r.wall_s) for kind in (ones, spreads))
    wall_ratio = spread.wall_s / one.wall_s
    cpu_one, cpu_spread = (1000 * min(r.cpu_s for r in kind) / hosts for kind in (ones, spreads))
    cpu_ratio = cpu_spread / cpu_one
    same = equal_documents(one.document, spread.document)
    print(f"{'--workers 1':13} wall {one.wall_s:.2f} s   controller CPU {cpu_one:.2f} ms/host")
    print(f"{spread_name:13} wall {spread.wall_s:.2f} s   controller CPU {cpu_spread:.2f} ms/host")
    print(f"wall ratio {wall_ratio:.2f}x (target <= {WALL_TARGET}x)   CPU per host ratio "
          f"{cpu_ratio:.2f}x against --workers 1 alone")  # fmt: skip
    print(f"run documents equal apart from timings: {'yes' if same else 'NO'}")
    say_split(ones, spreads, hosts)
    say_worker(spreads, cpu_spread)
    if rounds.loaded:
        cpu_ratio, same_loaded = say_loaded(rounds.loaded, one, cpu_spread, spreads, hosts)
        same = same and same_loaded
    print(f"verdict: wall {wall_ratio:.2f}x (<= {WALL_TARGET}x), CPU per host {cpu_ratio:.2f}x "
          f"(<= {CPU_TARGET}x, against --workers 1 "
          f"{'at the same load' if rounds.loaded else 'alone'})")  # fmt: skip
    codes_ok = all(r.exit_code == 0 for r in runs)
    codes_ok &= all(code == 0 for t in rounds.loaded for code in t.exit_codes)
    return same and codes_ok and wall_ratio <= WALL_TARGET and cpu_ratio <= CPU_TARGET


def say_worker(spreads: Sequence[Measure], cpu_spread: float) -> None:
    """The controller's whole CPU per host against one of its own workers' in the same run."""
    workers = [r.worker_ms for r in spreads if r.worker_ms is not None]
    if workers:
        worker = min(workers)
        print(f"one worker's own CPU in the default run (the median worker, least of the rounds):"
              f" {worker:.2f} ms/host; the whole controller's {cpu_spread:.2f} is "
              f"{cpu_spread / worker:.2f}x that")  # fmt: skip


def say_loaded(
    loaded: Sequence[Together],
    one: Measure,
    cpu_spread: float,
    spreads: Sequence[Measure],
    hosts: int,
) -> tuple[float, bool]:
    """--workers 1 at the default's load: its CPU per host, the ratio held against it, and
    whether every copy's document equals the single run's apart from timings."""
    reference = least_median(loaded, hosts)
    ratio = cpu_spread / reference
    same = all(equal_documents(one.document, doc) for t in loaded for doc in t.documents)
    copies = len(loaded[0].cpu_s)
    print(f"--workers 1 at the default's load ({copies} at once, the median copy, least of the "
          f"rounds): {reference:.2f} ms/host; CPU per host ratio {ratio:.2f}x "
          f"(target <= {CPU_TARGET}x); their documents equal the single run's: "
          f"{'yes' if same else 'NO'}")  # fmt: skip
    by_round = [1000 * r.cpu_s / hosts / t.ms_per_host(hosts) for r, t in zip(spreads, loaded)]
    print(f"  round by round (each default against its own copies): "
          f"{', '.join(f'{x:.2f}x' for x in by_round)}; median {statistics.median(by_round):.2f}x")  # fmt: skip
    fans = [1000 * statistics.median(t.fanouts_s) / hosts for t in loaded if t.fanouts_s]
    spread_fans = [1000 * r.fanout_cpu_s / hosts for r in spreads if r.fanout_cpu_s is not None]
    if fans and spread_fans:
        print(f"  the fan-outs' own at the same load: {min(fans):.2f} (one process) and "
              f"{min(spread_fans):.2f} ms/host (the workers), "
              f"{min(spread_fans) / min(fans):.2f}x")  # fmt: skip
    return ratio, same


def say_split(ones: Sequence[Measure], spreads: Sequence[Measure], hosts: int) -> None:
    """The CPU-per-host ratio split: the fan-outs' own CPU per host (the same work, one process
    against the workers), and the rest (start-up, the seed, the relay, the document, judging)."""
    least = [min(((r.cpu_s, r.fanout_cpu_s) for r in kind if r.fanout_cpu_s is not None),
                 default=None) for kind in (ones, spreads)]  # fmt: skip
    if least[0] is None or least[1] is None:
        return
    (one_cpu, one_fan), (spread_cpu, spread_fan) = least[0], least[1]
    one_host, spread_host = 1000 * one_fan / hosts, 1000 * spread_fan / hosts
    one_rest, spread_rest = one_cpu - one_fan, spread_cpu - spread_fan
    print(f"of which the fan-outs' own: {one_host:.2f} and {spread_host:.2f} ms/host "
          f"({spread_host / one_host:.2f}x); the rest {one_rest:.2f} and {spread_rest:.2f} s "
          f"(+{1000 * (spread_rest - one_rest) / hosts:.2f} ms/host)")  # fmt: skip


def equal_documents(first: Path, second: Path) -> bool:
    one, two = (without_timings(json.loads(p.read_text())) for p in (first, second))
    return bool(one == two)


def more_rig_plan(args: argparse.Namespace) -> CpuPlan | None:
    """The second configuration: the rig given more of the CPUs (`--more-rig FLEET/RIG`, or by
    default with --quick 3/8 of the physical cores for fleet), to see whether the rig bounds the
    wall: if the default's wall falls with the rig's CPUs, the rig was the bound."""
    if args.more_rig:
        fleet, _, rig = args.more_rig.partition("/")
        return CpuPlan(parse_cpus(fleet), parse_cpus(rig), "the rig given more CPUs, as given")
    if not args.quick or args.unpinned:
        return None
    fleet_cpus, rig_cpus, note = split_cpus(os.sched_getaffinity(0), fleet_share=3 / 8)
    return CpuPlan(fleet_cpus, rig_cpus, f"the rig given more CPUs: {note}")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=None, help="instead of the default")
    parser.add_argument("--rounds", type=int, default=None, help="default 1 (--quick: 2)")
    parser.add_argument(
        "--rig-procs", type=int, default=None, help="default: one per rig CPU (unpinned: half)"
    )
    parser.add_argument("--fleet-cpus", help="fleet's CPUs, e.g. 0-7 (default: the lower half)")
    parser.add_argument("--rig-cpus", help="the rig's CPUs, e.g. 8-15 (default: the upper half)")
    parser.add_argument("--unpinned", action="store_true", help="both on every core, as before")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--more-rig", metavar="FLEET/RIG",
                        help="then one round with these CPU sets, e.g. 0-5/6-15")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds (unless --rounds), then one round with the rig on 5/8 of "
                        "the cores (unless --more-rig): one device call")  # fmt: skip
    parser.add_argument("--no-loaded", action="store_true",
                        help="skip the --workers 1 copies at the default's load (workers_loaded.py)")  # fmt: skip
    parser.add_argument("--no-calibration", action="store_true",
                        help="skip bench/cpu_calibration.py's figures (pinned runs print them)")  # fmt: skip
    parser.add_argument("--ctrl-c-after", type=float, metavar="S", default=None,
                        help="then one default run interrupted after S s (--quick: 1.0)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick and args.ctrl_c_after is None:
        args.ctrl_c_after = 1.0
    if args.quick and args.rounds is None:
        args.rounds = 2
    args.rounds = args.rounds or 1
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="fleet-workers-"))
    try:
        spread_name = f"--workers {args.workers}" if args.workers else "default"
        plan = plan_cpus(args)
        if plan.fleet and plan.rig and not args.no_calibration:
            print("\n".join(calibrate(plan.fleet, plan.rig)), flush=True)
        rounds = measure(args, workdir, plan, args.rounds)
        met = report(rounds, args.hosts, spread_name)
        more = more_rig_plan(args)
        if more is not None:
            print("\nthe same with the rig given more CPUs (one round; the verdict is the above):")
            report(measure(args, workdir, more, 1, "more-rig"), args.hosts, spread_name)
    finally:
        if args.keep:
            print(f"work folder kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
