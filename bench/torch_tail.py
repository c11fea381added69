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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
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
