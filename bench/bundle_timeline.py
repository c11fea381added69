"""Where the bundle's time goes on one host: a timeline of the host runner, its preloader and
each probe, from the runner's start to its end (no controller).

    python3 bench/bundle_timeline.py [--probes a,b,...] [--runs N] [--src TREE]

Builds the bundle fleet sends (fleet.execution.bundle, default probes as `fleet probe
--no-allreduce`), adds a few lines before the runner's `__main__` block that wrap its own
functions (preloader_main, fork_adopted_probe, child_main, run_probe_source, Scheduler.finish)
to append `seconds pid event` to a trace file, and runs it as a transport does (`python -S -c
LAUNCHER` with the script on stdin). Prints, per run, each event's time since the interpreter was
started, and a bare `python3 -c "import torch"` beside it. Measurement only: the product's runner
is not changed by it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRACE = r"""
def _trace(event):
    with open(_TRACE_FILE, "a") as handle:
        handle.write("%.6f %d %s\n" % (time.time(), os.getpid(), event))


def _traced(function, before, after=None):
    def wrapper(*args, **kwargs):
        _trace(before(*args))
        try:
            return function(*args, **kwargs)
        finally:
            if after:
                _trace(after(*args))
    return wrapper


_TRACE_FILE = os.environ["FLEET_TRACE_FILE"]
_trace("runner: script running")


def _patch(name, before, after=None):
    # wrap `name` wherever the runner's modules hold it: the runner's helpers live in modules
    # of their own (RUNNER_MODULES), each imported by name
    holders = [sys.modules[m] for m in list(sys.modules) if m.startswith("_runner_")]
    original = next(getattr(h, name) for h in holders if hasattr(h, name))
    wrapped = _traced(original, before, after)
    for holder in holders:
        if getattr(holder, name, None) is original:
            setattr(holder, name, wrapped)
    return wrapped


_patch("preloader_main", lambda procs, modules, *a: "preloader: start")
_patch("fork_adopted_probe", lambda proc, *a: "preloader: fork " + proc.name,
       lambda proc, *a: "preloader: forked " + proc.name)
_patch("child_main", lambda name, *a: "probe %s: child starts" % name)
_patch("run_probe_source", lambda name, *a: "probe %s: runs" % name,
       lambda name, *a: "probe %s: collected" % name)
Scheduler.finish = _traced(
    Scheduler.finish, lambda self, proc, *a: "runner: reaped " + proc.name)
run_bundle = _traced(run_bundle, lambda b: "runner: run_bundle", lambda b: "runner: done")
"""

DEFAULT_PROBES = "system,packages,gpu,torch,nccl,dir,imports,health,live,net"


def traced_script(src: Path, probes: list[str]) -> bytes:
    sys.path.insert(0, str(src))
    from fleet.execution.bundle import build_bundle
    from fleet.execution.fanout import REMOTE_PARALLEL

    script = build_bundle(probes).script({}, 300.0, REMOTE_PARALLEL)
    marker = b'\nif __name__ == "__main__":'
    head, found, tail = script.rpartition(marker)
    if not found:
        raise SystemExit("the runner has no __main__ block: cannot add the trace")
    return head + TRACE.encode() + found + tail


def one_run(script: bytes) -> list[tuple[float, str]]:
    from fleet.transport.launch import LAUNCH_ARGS

    with tempfile.TemporaryDirectory() as work:
        trace = Path(work) / "trace.txt"
        env = {**os.environ, "FLEET_TRACE_FILE": str(trace)}
        started = time.time()
        done = subprocess.run(
            [sys.executable, *LAUNCH_ARGS], input=script, capture_output=True, env=env, timeout=300
        )
        ended = time.time()
        events = [
            (float(t) - started, f"{pid} {what}")
            for t, pid, what in (line.split(" ", 2) for line in trace.read_text().splitlines())
        ]
        events.append((ended - started, f"exit {done.returncode} (controller sees the end)"))
        return sorted(events)


def bare_import() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=False, timeout=300)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", default=DEFAULT_PROBES)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    script = traced_script(args.src, args.probes.split(","))
    bare, totals = [], []
    for run in range(args.runs):
        bare.append(bare_import())
        events = one_run(script)
        totals.append(events[-1][0])
        print(f"--- run {run + 1}: import torch alone {bare[-1]:.3f} s")
        for seconds, what in events:
            print(f"{seconds:8.3f}  {what}")
    torch_s, bundle_s = statistics.median(bare), statistics.median(totals)
    print(
        f"median: import torch {torch_s:.3f} s, bundle {bundle_s:.3f} s ({bundle_s / torch_s:.2f}x)"
    )


if __name__ == "__main__":
    main()
