"""What the torch probe costs on a GPU host beyond a bare `import torch` (issue 45): its CUDA
start and, once it has written its result, the process's own exit, which the host runner waits
for before the host is done.

    python3 bench/torch_tail.py [--runs N]

Per run and step, in a fresh process each: `import torch` alone; then cuInit (the driver); then
torch's CUDA start (device count and properties, as the probe asks); then the probe's library
versions (cuDNN, NCCL). Each child stamps the moment it is done and ends with `os._exit(0)` as a
probe does; the parent reads how long the import and the CUDA calls took, and how long the exit
took after the stamp (until wait4 returns). Also `import triton` after torch, which the imports
probe does next. Measurement only; needs torch, and a GPU for the CUDA steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

STEPS = {
    "import torch": "",
    "+ cuInit": "import ctypes; ctypes.CDLL('libcuda.so.1').cuInit(0)",
    "+ torch CUDA start": (
        "torch.cuda.is_available(); [torch.cuda.get_device_properties(i) "
        "for i in range(torch.cuda.device_count())]"
    ),
    "+ cuDNN, NCCL versions": (
        "torch.cuda.is_available(); torch.cuda.get_device_properties(0); "
        "torch.backends.cudnn.version(); torch.cuda.nccl.version()"
    ),
    "+ import triton": "import triton",
}

CHILD = """
import json, os, sys, time
started = time.time()
import torch
imported = time.time()
{step}
done = time.time()
with open(sys.argv[1], "w") as out:
    json.dump({{"import": imported - started, "step": done - imported, "stamp": done}}, out)
os._exit(0)
"""


def one(step: str) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("r", suffix=".json") as stamp:
        process = subprocess.Popen([sys.executable, "-c", CHILD.format(step=step), stamp.name])
        os.wait4(process.pid, 0)
        ended = time.time()
        found: dict[str, float] = json.loads(stamp.read() or "{}")
    if not found:
        return {"import": float("nan"), "step": float("nan"), "exit": float("nan")}
    return {"import": found["import"], "step": found["step"], "exit": ended - found["stamp"]}


# --probe-steps: the torch probe's own queries, in its order, timed one after the other in one
# process (cuInit started in a thread before the import, as the host runner does for it).
PROBE_STEPS = """
import json, os, sys, threading, time
import ctypes
def cu_init():
    try:
        ctypes.CDLL("libcuda.so.1").cuInit(0)
    except OSError:
        pass  # no driver here: the CUDA steps then say so
threading.Thread(target=cu_init, daemon=True).start()
stamps = [("start", time.time())]
import torch
stamps.append(("import torch", time.time()))
def step(name, call):
    try:
        call()
    except Exception as exc:
        name += " (raised %s)" % type(exc).__name__
    stamps.append((name, time.time()))
cuda = torch.cuda
step("cudnn version", lambda: torch.backends.cudnn.version())
step("nccl version", lambda: cuda.nccl.version())
step("arch list", lambda: cuda.get_arch_list())
step("is_available, device_count", lambda: (cuda.is_available(), cuda.device_count()))
step("device facts", lambda: [(cuda.get_device_capability(i), cuda.get_device_name(i),
                               cuda.get_device_properties(i)) for i in range(cuda.device_count())])
step("peer access", lambda: [cuda.can_device_access_peer(a, b) for a in range(cuda.device_count())
                             for b in range(cuda.device_count()) if a != b])
import importlib
step("import torch.distributed._symmetric_memory",
     lambda: importlib.import_module("torch.distributed._symmetric_memory"))
from importlib import metadata
step("triton version (metadata)", lambda: metadata.version("triton"))
with open(sys.argv[1], "w") as out:
    json.dump(stamps, out)
os._exit(0)
"""


def probe_steps(runs: int) -> None:
    rows: dict[str, list[float]] = {}
    for _ in range(runs):
        with tempfile.NamedTemporaryFile("r", suffix=".json") as stamp:
            process = subprocess.Popen([sys.executable, "-c", PROBE_STEPS, stamp.name])
            os.wait4(process.pid, 0)
            ended = time.time()
            stamps = json.loads(stamp.read() or "[]")
        if not stamps:
            print("a run wrote nothing")
            continue
        stamps.append(("exit (until wait4)", ended))
        for (name, at), (_, before) in zip(stamps[1:], stamps):
            rows.setdefault(name, []).append(at - before)
    print(f"the torch probe's steps, medians of {runs} runs, seconds ({sys.executable})")
    for name, took in rows.items():
        print(f"  {name:44s} {statistics.median(took):7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--probe-steps", action="store_true", help="the probe's queries, timed")
    args = parser.parse_args()
    if args.probe_steps:
        probe_steps(args.runs)
        return
    table: dict[str, list[dict[str, float]]] = {name: [] for name in STEPS}
    for _ in range(args.runs):
        for name, step in STEPS.items():  # interleaved: the machine's drift hits every step alike
            table[name].append(one(step))
    print(f"medians of {args.runs} runs, seconds ({sys.executable})")
    print(f"{'step':24s} {'import torch':>12s} {'the step':>9s} {'exit':>7s}")
    for name, runs in table.items():
        medians = [statistics.median(r[key] for r in runs) for key in ("import", "step", "exit")]
        print(f"{name:24s} {medians[0]:12.3f} {medians[1]:9.3f} {medians[2]:7.3f}")


if __name__ == "__main__":
    main()
