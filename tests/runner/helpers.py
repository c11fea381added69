"""Hand-made probes and process checks shared by the runner, integration and fault tests."""

from __future__ import annotations

import os

GOOD = """
def collect(options):
    return {"ok": True, "data": {"answer": 42}}
"""
# A probe that starts `sleep 600`, prints its own pid and the child's, then hangs.
SPAWNS_AND_HANGS = """
import os, subprocess, sys, time
TIMEOUT_S = {probe_timeout}
def collect(options):
    child = subprocess.Popen(["sleep", "600"])
    print("PIDS", os.getpid(), child.pid, flush=True)
    time.sleep(600)
"""


def pids_in(tail: str) -> list[int]:
    line = next(line for line in tail.splitlines() if line.startswith("PIDS"))
    return [int(p) for p in line.split()[1:]]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def sleepers() -> list[int]:
    """Live `sleep 600` processes on this machine."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if handle.read() == b"sleep\x00600\x00" and alive(int(pid)):
                    found.append(int(pid))
        except OSError:
            continue
    return found


def load_runner(file_name: str = "_host_runner.py"):  # -> the module (untyped: host-side code)
    """probes/runner/_host_runner.py (or one of its RUNNER_MODULES) imported afresh in this
    process, for its functions alone (its __main__ block does not run; FLEET_* are read from the
    environment now): what the bundle's runner does, without a bundle. The runner's modules are
    imported from the runner's folder, as when the runner is run by hand; that folder is on
    sys.path only while the file loads, and last."""
    import importlib.util
    import sys

    from fleet.shipped import runner_folder

    folder = str(runner_folder())
    spec = importlib.util.spec_from_file_location(
        "fleet_host_runner_under_test_" + file_name[:-3], f"{folder}/{file_name}"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.append(folder)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module
