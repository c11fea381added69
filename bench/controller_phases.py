"""Where `fleet probe` on this machine spends its wall time outside the host's own work: from the
interpreter's start (the kernel's process start time) to fleet's imports, to the bundle's launch,
to the host's end, to the process's end; with the CPU time at each point.

    python3 bench/controller_phases.py [--runs N] [FLEET PROBE ARGS...]   # default: --no-allreduce

Runs `fleet probe` in this process (as `python3 -m fleet probe` would) with a stamp at each step:
the local transport's interpreter choice and launch are wrapped, nothing else changes. One line
per step and run, then the medians. Measurement only: the product is not changed by it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

CHILD = r"""
import os, sys, time
def since_start():
    # the kernel's start time of this process, in clock ticks since boot
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return up - ticks / os.sysconf("SC_CLK_TCK")
T0 = time.monotonic() - since_start()
STAMPS = []
def stamp(what):
    STAMPS.append((what, time.monotonic() - T0, time.process_time()))
stamp("interpreter running")
from fleet.collector import pause_start_up
pause_start_up()  # as the executable starts (fleet/__main__.py)
import fleet.transport.local as local
stamp("transport imported")
chosen = local.choose
async def choose(name, environ=os.environ):
    found = await chosen(name, environ)
    stamp("interpreter chosen")
    return found
local.choose = choose
argv = local.launch_argv
def launch_argv(*args, **kwargs):
    stamp("bundle launched")
    return argv(*args, **kwargs)
local.launch_argv = launch_argv
talk = local.LocalSession._talk
async def _talk(self, *args, **kwargs):
    try:
        return await talk(self, *args, **kwargs)
    finally:
        stamp("host done")
local.LocalSession._talk = _talk
from fleet.cli import main
sys.argv = ["fleet", "probe", *sys.argv[1:]]
try:
    main(standalone_mode=False)
except BaseException:
    pass
stamp("fleet done")
sys.stderr.write("STAMPS " + repr(STAMPS) + "\n")
"""


def one_run(args: list[str]) -> list[tuple[str, float, float]]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=300
    )
    line = next((x for x in done.stderr.splitlines() if x.startswith("STAMPS ")), None)
    if line is None:
        raise SystemExit(f"no stamps: {done.stderr[-2000:]}")
    stamps: list[tuple[str, float, float]] = eval(line[len("STAMPS ") :])  # our own repr
    return stamps


def main() -> None:
    args = sys.argv[1:]
    runs = 3
    if args[:1] == ["--runs"]:
        runs, args = int(args[1]), args[2:]
    args = args or ["--no-allreduce", "--no-save"]
    env_note = os.environ.get("VIRTUAL_ENV") or sys.prefix
    print(f"fleet probe {' '.join(args)}  ({sys.executable}, {env_note})")
    table: dict[str, list[tuple[float, float]]] = {}
    for run in range(runs):
        stamps = one_run(args)
        print(f"--- run {run + 1}")
        for what, wall, cpu in stamps:
            print(f"  {what:22s} wall {wall:6.3f} s  cpu {cpu:6.3f} s")
            table.setdefault(what, []).append((wall, cpu))
    print(f"--- medians of {runs}")
    for what, points in table.items():
        wall = statistics.median(p[0] for p in points)
        cpu = statistics.median(p[1] for p in points)
        print(f"  {what:22s} wall {wall:6.3f} s  cpu {cpu:6.3f} s")


if __name__ == "__main__":
    main()
