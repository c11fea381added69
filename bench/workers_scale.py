"""`fleet probe` with one worker and with the default (one per core): wall and controller CPU.

    python3 bench/workers_scale.py --hosts 2000            # the issue 49 figure (16+ cores)
    python3 bench/workers_scale.py --hosts 50 --workers 2  # a small check on a small machine

Starts the asyncssh rig (bench/asyncssh_rig.py: its hosts replay one real run of `-p system`,
so the figure is the controller's), records that run once (one host, not measured), then runs
`python -m fleet probe -i RIG -p system --no-save --json FILE` with `--workers 1` and with the
default (or --workers N), `--rounds` times each, alternating. Per run: wall, and the controller's
CPU: user+sys of the fleet process and every process under it (its seed and workers are reaped
inside the tree, so wait4 on fleet counts them). Prints each run, then the best wall of each, CPU
per host (ms), the wall ratio (target <= 0.3x) and CPU per host ratio (target <= 1.2x), and
whether the run documents are equal apart from timings (started, finished, elapsed_s) and the
file they name. Needs only what `pip install .` brings; no pytest, no sshd.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from asyncssh_rig import host_name, start_rig

from tests.integration.fleet_runs import without_timings

ROOT = Path(__file__).resolve().parents[1]
WALL_TARGET, CPU_TARGET = 0.3, 1.2


@dataclass(frozen=True)
class Measure:
    label: str
    wall_s: float
    cpu_s: float
    exit_code: int
    document: Path


def run_fleet(inventory: Path, workdir: Path, label: str, extra: Sequence[str]) -> Measure:
    """One `fleet probe`, reaped with wait4: its wall and its process tree's CPU."""
    out = workdir / f"{label}.json"
    command = [sys.executable, "-m", "fleet", "probe", "-i", str(inventory), "-p", "system",
               "--no-save", "--json", str(out), *extra]  # fmt: skip
    env = {**os.environ, "XDG_STATE_HOME": str(workdir / "state"), "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, cwd=workdir, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return Measure(label, wall, usage.ru_utime + usage.ru_stime, process.returncode, out)


def measure(args: argparse.Namespace, workdir: Path) -> list[Measure]:
    procs = args.rig_procs or max(1, (os.cpu_count() or 2) // 2)
    started = time.monotonic()
    with start_rig(workdir / "rig", args.hosts, procs) as rig:
        print(f"rig: {args.hosts} hosts in {procs} processes ({time.monotonic() - started:.1f} s)")
        record = run_fleet(rig.inventory, workdir, "record", ["-l", host_name(0), "--workers", "1"])
        assert record.exit_code == 0, f"recording the rig's answer failed: exit {record.exit_code}"
        spread = ["--workers", str(args.workers)] if args.workers else []
        runs = []
        for round_ in range(args.rounds):
            for label, extra in (("one", ["--workers", "1"]), ("spread", spread)):
                done = run_fleet(rig.inventory, workdir, f"{label}-{round_}", extra)
                print(f"  {done.label:10} wall {done.wall_s:7.2f} s  CPU {done.cpu_s:7.2f} s  "
                      f"exit {done.exit_code}")  # fmt: skip
                runs.append(done)
    return runs


def report(runs: Sequence[Measure], hosts: int) -> bool:
    one = min((r for r in runs if r.label.startswith("one")), key=lambda r: r.wall_s)
    spread = min((r for r in runs if r.label.startswith("spread")), key=lambda r: r.wall_s)
    wall_ratio = spread.wall_s / one.wall_s
    cpu_one, cpu_spread = 1000 * one.cpu_s / hosts, 1000 * spread.cpu_s / hosts
    cpu_ratio = cpu_spread / cpu_one
    same = equal_documents(one.document, spread.document)
    print(f"--workers 1   wall {one.wall_s:.2f} s   controller CPU {cpu_one:.2f} ms/host")
    print(f"default       wall {spread.wall_s:.2f} s   controller CPU {cpu_spread:.2f} ms/host")
    print(f"wall ratio {wall_ratio:.2f}x (target <= {WALL_TARGET}x)   "
          f"CPU per host ratio {cpu_ratio:.2f}x (target <= {CPU_TARGET}x)")  # fmt: skip
    print(f"run documents equal apart from timings: {'yes' if same else 'NO'}")
    codes_ok = all(r.exit_code == 0 for r in runs)
    return same and codes_ok and wall_ratio <= WALL_TARGET and cpu_ratio <= CPU_TARGET


def equal_documents(first: Path, second: Path) -> bool:
    one, two = (without_timings(json.loads(p.read_text())) for p in (first, second))
    return bool(one == two)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=None, help="instead of the default")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--rig-procs", type=int, default=None, help="default: half the cores")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="fleet-workers-"))
    try:
        runs = measure(args, workdir)
        met = report(runs, args.hosts)
    finally:
        if args.keep:
            print(f"work folder kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
