"""Plain torch loops for each figure of the `gpubench` probe: the yardstick it is held to (5%).

    python3 bench/gpubench_reference.py [--json OUT] [--quick]     # every GPU, then the pairs
    python3 bench/gpubench_reference.py --compare RUN.json --reference OUT   # probe vs reference
    python3 bench/gpubench_reference.py --load GPU --seconds S      # keep one GPU busy (a "slow" GPU)

Per GPU, one process each (torch.multiprocessing, spawn), all GPUs at once, each figure started
together behind a barrier: BF16, FP16 (and FP8 through torch._scaled_mm on compute capability 8.9
and later) matmuls of the probe's shapes, 0.3 s of warm-up, then 5 repetitions of back-to-back
calls timed with CUDA events; the median repetition is the figure, the best shape is kept.
Device copy (256 MiB, read + write counted), pinned host→device and device→host (128 MiB).
Then one process with every GPU: each ordered pair alone (256 MiB peer copies on a stream of the
source GPU), each pair both ways at once, and every pair at once. The definitions are the probe's
(probes/helpers/gpubench/_gpubench_worker.py); the code shares nothing with it. CUDA_DEVICE_ORDER=PCI_BUS_ID, as
the probe's workers, so index i is the same GPU in both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192)]
QUICK_SHAPES = [(8192, 8192, 8192)]
COPY, HOST_COPY, PAIR_COPY = 256 << 20, 128 << 20, 256 << 20
REPS = 5
TARGET_S = 0.05  # per repetition
TOLERANCE = 0.05  # the "each figure within 5% of the plain torch reference"


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def seconds_per_call(torch: Any, fn: Any, stream: Any = None) -> float:
    """Median over REPS repetitions of back-to-back calls (about TARGET_S each), CUDA events."""
    stream = stream or torch.cuda.current_stream()

    def timed(count: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(count):
            fn()
        end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    timed(2)
    count = max(1, min(200, int(TARGET_S / max(timed(1), 1e-6))))
    return median([timed(count) / count for _ in range(REPS)])


# ------------------------------------------------------------------------------ one GPU
def matmul_call(torch: Any, dtype: str, shape: tuple[int, int, int], dev: Any) -> Any:
    """One (m×k)·(k×n) product in `dtype` (FP8: torch._scaled_mm, B column-major)."""
    m, n, k = shape
    if dtype == "float8_e4m3fn":
        x = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        y = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(x, y, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    kind = getattr(torch, dtype)
    a = torch.randn(m, k, device=dev, dtype=kind)
    b = torch.randn(k, n, device=dev, dtype=kind)
    out = torch.empty(m, n, device=dev, dtype=kind)
    return lambda: torch.matmul(a, b, out=out)


def gpu_worker(index: int, shapes: list[tuple[int, int, int]], barrier: Any, queue: Any) -> None:
    import torch

    torch.cuda.set_device(index)
    dev = torch.device("cuda", index)
    props = torch.cuda.get_device_properties(index)
    found: dict[str, Any] = {
        "cuda_index": index,
        "name": props.name,
        "uuid": str(getattr(props, "uuid", "")),
        "tflops": {},
        "gbps": {},
    }
    dtypes = ["bfloat16", "float16"]
    if (props.major, props.minor) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        dtypes.append("float8_e4m3fn")
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    started = time.perf_counter()
    while time.perf_counter() - started < 0.3:  # clocks up, cuBLAS loaded
        torch.matmul(a, a)
        torch.cuda.synchronize()
    del a
    for dtype in dtypes:
        best = 0.0
        for m, n, k in shapes:
            barrier.wait()
            fn = matmul_call(torch, dtype, (m, n, k), dev)
            try:
                best = max(best, 2 * m * n * k / seconds_per_call(torch, fn) / 1e12)
            except RuntimeError as exc:  # FP8 refused by this build: said, not fatal
                found.setdefault("errors", {})[dtype] = str(exc)[:200]
            del fn
            torch.cuda.empty_cache()
        if best:
            found["tflops"][dtype] = round(best, 1)
    src = torch.empty(COPY, dtype=torch.uint8, device=dev)
    dst = torch.empty(COPY, dtype=torch.uint8, device=dev)
    barrier.wait()
    found["gbps"]["memcpy"] = round(
        2 * COPY / seconds_per_call(torch, lambda: dst.copy_(src)) / 1e9, 1
    )
    host = torch.empty(HOST_COPY, dtype=torch.uint8, pin_memory=True)
    card = torch.empty(HOST_COPY, dtype=torch.uint8, device=dev)
    barrier.wait()
    h2d = seconds_per_call(torch, lambda: card.copy_(host, non_blocking=True))
    barrier.wait()
    d2h = seconds_per_call(torch, lambda: host.copy_(card, non_blocking=True))
    found["gbps"]["h2d"] = round(HOST_COPY / h2d / 1e9, 2)
    found["gbps"]["d2h"] = round(HOST_COPY / d2h / 1e9, 2)
    queue.put(found)


# ------------------------------------------------------------------------------ pairs
def concurrent_gbps(
    torch: Any, copies: list[tuple[int, int]], bufs: dict, streams: dict
) -> list[float]:
    """GB/s of each (src, dst) copy while all of `copies` run, each on its source's stream."""

    def once(count: int) -> list[float]:
        for d in {d for pair in copies for d in pair}:
            torch.cuda.synchronize(d)
        marks = []
        for src, dst in copies:
            stream = streams[(src, dst)]
            with torch.cuda.device(src), torch.cuda.stream(stream):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record(stream)
                for _ in range(count):
                    bufs[(src, dst)].copy_(bufs[src], non_blocking=True)
                end.record(stream)
            marks.append((start, end))
        for _, end in marks:
            end.synchronize()
        return [start.elapsed_time(end) / 1e3 / count for start, end in marks]

    once(2)
    count = max(2, min(200, int(TARGET_S / max(max(once(1)), 1e-6))))
    runs = [once(count) for _ in range(REPS)]
    return [round(PAIR_COPY / median([r[i] for r in runs]) / 1e9, 1) for i in range(len(copies))]


def pairs_worker(count: int, queue: Any) -> None:
    import torch

    bufs: dict[Any, Any] = {}
    streams: dict[Any, Any] = {}
    ordered = [(a, b) for a in range(count) for b in range(count) if a != b]
    for a in range(count):
        bufs[a] = torch.empty(PAIR_COPY, dtype=torch.uint8, device=torch.device("cuda", a))
    for a, b in ordered:
        bufs[(a, b)] = torch.empty(PAIR_COPY, dtype=torch.uint8, device=torch.device("cuda", b))
        streams[(a, b)] = torch.cuda.Stream(device=torch.device("cuda", a))
    found = {(a, b): {} for a, b in ordered}
    for a, b in ordered:
        found[(a, b)]["one_way"] = concurrent_gbps(torch, [(a, b)], bufs, streams)[0]
    for a, b in ordered:
        if a < b:
            both = concurrent_gbps(torch, [(a, b), (b, a)], bufs, streams)
            found[(a, b)]["both_ways"], found[(b, a)]["both_ways"] = both
    for (a, b), value in zip(ordered, concurrent_gbps(torch, ordered, bufs, streams)):
        found[(a, b)]["all_active"] = value
    queue.put(
        [
            {"src": a, "dst": b, "peer_access": torch.cuda.can_device_access_peer(a, b), "gbps": g}
            for (a, b), g in found.items()
        ]
    )


def results(queue: Any, processes: list[Any], count: int, timeout_s: float = 300) -> list[Any]:
    """`count` results from `queue`; stop as soon as a process dies without giving its own
    (its traceback is on stderr), never wait out the timeout for a dead one."""
    import queue as queues

    found: list[Any] = []
    ends = time.monotonic() + timeout_s
    while len(found) < count:
        try:
            found.append(queue.get(timeout=1))
        except queues.Empty:
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > ends:
                for process in processes:
                    process.kill()
                why = f"exit code {dead[0].exitcode}" if dead else f"{timeout_s:g} s"
                raise SystemExit(f"reference: a measuring process failed ({why})") from None
    for process in processes:
        process.join(60)
    return found


def measure(quick: bool) -> dict[str, Any]:
    import torch
    import torch.multiprocessing as mp

    started = time.perf_counter()
    count = torch.cuda.device_count()
    context = mp.get_context("spawn")
    queue = context.Queue()
    barrier = context.Barrier(count)
    shapes = QUICK_SHAPES if quick else SHAPES
    workers = [
        context.Process(target=gpu_worker, args=(i, shapes, barrier, queue)) for i in range(count)
    ]
    for worker in workers:
        worker.start()
    gpus = sorted(results(queue, workers, count), key=lambda g: g["cuda_index"])
    pairs: list[dict[str, Any]] = []
    if count > 1:
        process = context.Process(target=pairs_worker, args=(count, queue))
        process.start()
        pairs = results(queue, [process], 1)[0]
    for gpu in gpus:  # each GPU's copies with every pair on, summed as the probe sums them
        out = [p["gbps"]["all_active"] for p in pairs if p["src"] == gpu["cuda_index"]]
        into = [p["gbps"]["all_active"] for p in pairs if p["dst"] == gpu["cuda_index"]]
        if out:
            gpu["gbps"]["peer_out_all_active"] = round(sum(out), 1)
            gpu["gbps"]["peer_in_all_active"] = round(sum(into), 1)
    return {
        "gpus": gpus,
        "pairs": pairs,
        "pairs_note": None if count > 1 else "1 GPU: no GPU pairs to measure",
        "elapsed_s": round(time.perf_counter() - started, 2),
        "torch_version": torch.__version__,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_", "CUDA_"))},
    }


# ------------------------------------------------------------------------------ a busy GPU
def load(index: int, seconds: float) -> None:
    """BF16 matmuls on GPU `index` for `seconds`: the GPU a benchmark beside it must name slow."""
    import torch

    dev = torch.device("cuda", index)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    print(f"loading GPU {index} for {seconds:g} s", flush=True)
    ends = time.time() + seconds
    while time.time() < ends:
        for _ in range(20):
            torch.matmul(a, a)
        torch.cuda.synchronize(dev)


# ------------------------------------------------------------------------------ compare
PAIR_KEYS = ("one_way", "both_ways", "all_active")


def compare(run_path: str, reference_path: str) -> int:
    """Each probe figure against the reference's; exit 1 when one is off by more than 5% or
    missing. Also the probe's wall time and what it left behind."""
    with open(run_path) as handle:
        run = json.load(handle)
    with open(reference_path) as handle:
        reference = json.load(handle)
    ref_gpus = {g["cuda_index"]: g for g in reference["gpus"]}
    ref_pairs = {(p["src"], p["dst"]): p for p in reference["pairs"]}
    code = 0
    for host, outcome in run["hosts"].items():
        result = outcome["probes"].get("gpubench") or {}
        data = result.get("data") or {}
        print(
            f"{host}: gpubench {result.get('status')} in {data.get('elapsed_s')} s (probe), "
            f"{result.get('elapsed_s')} s (runner); stopped early: {data.get('stopped_early')} "
            f"{data.get('stopped') or ''}; left: {data.get('cleanup')}"
        )
        if result.get("status") != "ok":
            code = 1
            continue
        print(f"  {'figure':38} {'probe':>10} {'reference':>10} {'ratio':>7}")
        for gpu in data["gpus"]:
            ref = ref_gpus.get(gpu["cuda_index"], {})
            for group in ("tflops", "gbps"):
                for key in sorted(set(gpu.get(group) or {}) | set(ref.get(group) or {})):
                    code |= row(
                        f"GPU{gpu['index']} {key}",
                        (gpu.get(group) or {}).get(key),
                        (ref.get(group) or {}).get(key),
                    )
        for pair in data["pairs"]:
            ref = ref_pairs.get((pair["src"], pair["dst"]), {})
            for key in PAIR_KEYS:
                name = f"GPU{pair['src']}→GPU{pair['dst']} {key}"
                code |= row(name, pair["gbps"].get(key), ref.get("gbps", {}).get(key))
        if data.get("pairs_note"):
            print(f"  {data['pairs_note']}")
    return code


def row(name: str, probe: float | None, reference: float | None) -> int:
    if probe is None or reference is None:
        print(f"  {name:38} {probe!s:>10} {reference!s:>10}  missing")
        return 1
    ratio = probe / reference
    off = abs(ratio - 1) > TOLERANCE
    print(f"  {name:38} {probe:10.1f} {reference:10.1f} {ratio:7.3f}{'  OFF' if off else ''}")
    return int(off)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", default="-")
    parser.add_argument("--quick", action="store_true", help="one shape (8192³), as --quick")
    parser.add_argument("--compare", metavar="RUN_JSON")
    parser.add_argument("--reference", default="gpubench_reference.json")
    parser.add_argument("--load", type=int, metavar="GPU", help="keep GPU busy with matmuls")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if args.compare:
        return compare(args.compare, args.reference)
    if args.load is not None:
        load(args.load, args.seconds)
        return 0
    text = json.dumps(measure(args.quick), indent=1)
    if args.json == "-":
        print(text)
    else:
        with open(args.json, "w") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
