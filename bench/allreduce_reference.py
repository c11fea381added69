"""A plain torch.distributed NCCL all_reduce loop: the yardstick for the `allreduce` probe.

    python3 bench/allreduce_reference.py [--world N] [--json OUT] [--sizes 8,268435456]
    python3 bench/allreduce_reference.py --compare RUN.json   # probe vs reference at 256 MiB

One process per GPU (torch.multiprocessing), bf16, eager, CUDA-event timed: 20 warm-up iterations per
size, then 7 repetitions of 20 timed iterations, each the slowest rank's time (as nccl-tests does);
the median repetition is reported, with min and max (the probe reports the same statistic).
busbw = algbw × 2(n−1)/n.
Needs a machine with ≥ 2 GPUs; the NVLink-multicast variables of the environment are left as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

SIZES = [8 * 4**i for i in range(14)] + [256 * 1024 * 1024]
WARMUP, ITERS, REPS = 20, 20, 7


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def worker(rank: int, world: int, port: int, queue: object, sizes: list[int] = SIZES) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        device_id=torch.device("cuda", rank),
    )
    rows = []
    for size in sorted(set(sizes)):
        numel = max(1, size // 2)
        tensor = torch.ones(numel, dtype=torch.bfloat16, device="cuda")
        for _ in range(WARMUP):
            dist.all_reduce(tensor)
        samples = sorted(repetition(torch, dist, tensor) for _ in range(REPS))
        seconds = samples[len(samples) // 2]
        algbw = numel * 2 / seconds / 1e9
        rows.append(
            {
                "bytes": numel * 2,
                "latency_us": round(seconds * 1e6, 2),
                "latency_us_min": round(samples[0] * 1e6, 2),
                "latency_us_max": round(samples[-1] * 1e6, 2),
                "algbw_gbps": round(algbw, 2),
                "busbw_gbps": round(algbw * 2 * (world - 1) / world, 2),
            }
        )
    if rank == 0:
        queue.put(rows)  # type: ignore[attr-defined]
    dist.destroy_process_group()


def repetition(torch: Any, dist: Any, tensor: Any) -> float:
    """Seconds per allreduce over ITERS back-to-back calls, the slowest rank's."""
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        dist.all_reduce(tensor)
    end.record()
    torch.cuda.synchronize()
    elapsed = torch.tensor([start.elapsed_time(end) / ITERS], device="cuda")
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item()) / 1e3


def measure(world: int, sizes: list[int] = SIZES) -> dict:
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    processes = [
        context.Process(target=worker, args=(r, world, port, queue, sizes)) for r in range(world)
    ]
    for process in processes:
        process.start()
    rows = queue.get(timeout=300)
    for process in processes:
        process.join(60)
    return {
        "world_size": world,
        "dtype": "bfloat16",
        "mode": "eager",
        "results": rows,
        "env": {
            k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM_"))
        },
    }


def busbw_at(rows: list[dict], size: int, mode: str | None = None) -> float | None:
    for row in rows:
        if row["bytes"] == size and (mode is None or row.get("mode") == mode):
            return float(row["busbw_gbps"])
    return None


def compare(run_path: str, reference_path: str) -> int:
    """Print probe vs reference busbw at 256 MiB; exit 1 if the probe is off by more than 15%."""
    with open(run_path) as handle:
        run = json.load(handle)
    with open(reference_path) as handle:
        reference = json.load(handle)
    size = 256 * 1024 * 1024
    ref = busbw_at(reference["results"], size)
    code = 0
    for host, outcome in run["hosts"].items():
        data = outcome["probes"].get("allreduce", {}).get("data") or {}
        probe = busbw_at(data.get("results") or [], size, "eager")
        if probe is None or ref is None:
            print(f"{host}: no 256 MiB result (probe {probe}, reference {ref})")
            code = 1
            continue
        ratio = probe / ref
        print(f"{host}: probe busbw {probe:.1f} GB/s, reference {ref:.1f} GB/s, ratio {ratio:.3f}")
        code |= 0 if abs(ratio - 1) <= 0.15 else 1
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=0)
    parser.add_argument("--json", default="-")
    parser.add_argument("--compare", metavar="RUN_JSON")
    parser.add_argument("--reference", default="reference.json")
    parser.add_argument("--sizes", help="comma-separated bytes (default: 8 B … 512 MiB)")
    args = parser.parse_args()
    if args.compare:
        return compare(args.compare, args.reference)
    import torch

    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    result = measure(args.world or torch.cuda.device_count(), sizes)
    text = json.dumps(result, indent=1)
    if args.json == "-":
        print(text)
    else:
        with open(args.json, "w") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
