"""One rank of the `allreduce` probe: times torch.distributed allreduce, eager and CUDA-graph mode.

Not a probe (the leading underscore): probes/allreduce.py declares it in `SHIPS`, the bundle carries
its text beside the probe's, and the probe starts one `python -c <program> '<config json>'` per
rank (_worker_io.worker_program: this text run as __main__). Nothing is written on the host. Rank 0 prints its results as `MARKER {json}` lines on stdout
(NCCL_DEBUG output shares that stream). The planning functions at the top are pure and tested on
their own (tests/probes/test_allreduce.py). Stdlib and torch only, Python 3.8+.

It imports one shipped helper, _worker_io (its deadline, its end with the probe, its MARKER lines):
the ranks run in a fresh interpreter where the runner serves no helper, so the program it runs in
carries that module's text. What it shares with the probe (the MARKER, the config's keys) arrives
in its config argument.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from _worker_io import describe, emit, guard

Record = Dict[str, Any]


# ---------------------------------------------------------------------------------- planning
def iterations_for(estimate_s: float, budget_s: float, min_iters: int, max_iters: int) -> int:
    """As many timed iterations as fit the budget, at least min_iters, at most max_iters."""
    if estimate_s <= 0:
        return max_iters
    return int(max(min_iters, min(max_iters, budget_s / estimate_s)))


def graph_plan(iterations: int, max_captured: int = 10, max_replays: int = 5) -> Tuple[int, int]:
    """(allreduces captured in one graph, replays): about `iterations` allreduces in all."""
    captured = max(1, min(iterations, max_captured))
    replays = max(1, min(max_replays, -(-iterations // captured)))
    return captured, replays


def plan_steps(sizes: List[int], graph: bool, order: str) -> List[Tuple[str, int]]:
    """(mode, bytes) in the order measured: per size eager then graph ("by_size", the sweep), or
    every eager size before any graph ("by_mode", the matrix: a graph mode that hangs then costs
    only graph results)."""
    modes = ["eager", "graph"] if graph else ["eager"]
    if order == "by_mode":
        return [(mode, size) for mode in modes for size in sizes]
    return [(mode, size) for size in sizes for mode in modes]


def spread(samples: List[float]) -> Dict[str, float]:
    """Median, min and max of the repetitions' per-allreduce times (the median is reported: one
    repetition disturbed by the host, a clock ramp or a late rank moves it least)."""
    ordered = sorted(samples)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return {"seconds": median, "seconds_min": ordered[0], "seconds_max": ordered[-1]}


# ---------------------------------------------------------------------------------- the rank
# Never called, whatever an option says: multimem operations need NVLink multicast, which stays off.
MULTIMEM_MARK = "multimem"
SYMM_MEM_MODULES = ("torch.distributed._symmetric_memory", "torch.distributed.symmetric_memory")


class DistOp:
    """torch.distributed.all_reduce in place (NCCL or gloo, as the process group was made)."""

    def __init__(self, bench: "Bench") -> None:
        self.bench = bench

    def buffer(self, numel: int) -> Any:
        b = self.bench
        return b.torch.ones(numel, dtype=b.dtype, device=b.device)

    def run(self, buf: Any) -> Any:
        self.bench.dist.all_reduce(buf)
        return buf


class SymmMemOp:
    """One of torch's symmetric-memory allreduce kernels (torch.ops.symm_mem.<name>) over a
    buffer from symm_mem.empty + rendezvous, big enough for the largest size (views below it)."""

    def __init__(self, bench: "Bench", name: str, max_numel: int) -> None:
        if MULTIMEM_MARK in name:
            raise ValueError("%s needs NVLink multicast, which fleet never uses" % name)
        if not bench.on_cuda:
            raise RuntimeError("symmetric memory needs CUDA (backend %s)" % bench.cfg["backend"])
        self.bench = bench
        self.kernel = getattr(bench.torch.ops.symm_mem, name)
        self.group_name = bench.dist.group.WORLD.group_name
        module = import_first(SYMM_MEM_MODULES)
        enable = getattr(module, "enable_symm_mem_for_group", None)
        if enable is not None and not hasattr(module, "set_backend"):  # needed before torch 2.9
            enable(self.group_name)
        self.pool = module.empty(max_numel, dtype=bench.dtype, device=bench.device)
        module.rendezvous(self.pool, self.group_name)

    def buffer(self, numel: int) -> Any:
        return self.pool[:numel].fill_(1)

    def run(self, buf: Any) -> Any:
        out = self.kernel(buf, "sum", self.group_name)  # one_shot: a new tensor; two_shot_: buf
        return buf if out is None else out


def import_first(names: Tuple[str, ...]) -> Any:
    """The first module of `names` that imports (the imports probe's fallback rule)."""
    errors = []
    for name in names:
        try:
            return __import__(name, fromlist=["_"])
        except Exception as exc:  # any failure means: try the next name
            errors.append("%s: %s" % (name, describe(exc)))
    raise ImportError("; ".join(errors))


def make_op(bench: "Bench") -> Any:
    op = str(bench.cfg.get("op") or "dist")
    if op == "dist":
        return DistOp(bench)
    if op.startswith("symm_mem:"):
        elem = bench.torch.tensor([], dtype=bench.dtype).element_size()
        return SymmMemOp(bench, op.split(":", 1)[1], max(bench.cfg["sizes"]) // elem)
    raise ValueError("unknown op %r" % op)


class Bench:
    """The timing loops of one rank; every decision is agreed across ranks (no rank hangs alone)."""

    def __init__(self, cfg: Record, torch: Any, dist: Any) -> None:
        self.cfg, self.torch, self.dist = cfg, torch, dist
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.on_cuda = cfg["backend"] == "nccl"
        self.device = torch.device("cuda", self.rank) if self.on_cuda else torch.device("cpu")
        self.dtype = getattr(torch, cfg["dtype"])
        self.graph_ok = bool(cfg["graph"])
        self.op: Any = DistOp(self)
        self.iterations: Dict[int, int] = {}  # eager's per-repetition count, reused by graph mode

    def agree_max(self, values: List[float]) -> List[float]:
        """Every rank gets the same numbers, so every rank takes the same decisions (no hang)."""
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return [float(v) for v in t.tolist()]

    def sync(self) -> None:
        self.agree_max([0.0])
        if self.on_cuda:
            self.torch.cuda.synchronize()

    def timed(self, fn: Callable[[], Any], count: int) -> float:
        if not self.on_cuda:
            start = time.perf_counter()
            for _ in range(count):
                fn()
            return time.perf_counter() - start
        start_event = self.torch.cuda.Event(enable_timing=True)
        end_event = self.torch.cuda.Event(enable_timing=True)
        start_event.record()
        for _ in range(count):
            fn()
        end_event.record()
        end_event.synchronize()
        return float(start_event.elapsed_time(end_event)) / 1e3

    def repetitions(self, fn: Callable[[], Any], count: int, per_sample: int) -> List[float]:
        """`count` timed samples of `per_sample` calls each, every one started together on all
        ranks and taken as the slowest rank's time (as nccl-tests does), per call."""
        samples = []
        for _ in range(count):
            self.sync()
            samples.append(self.agree_max([self.timed(fn, per_sample)])[0] / per_sample)
        return samples

    def sum_is_correct(self, buf: Any, reduce: Callable[[], Any]) -> bool:
        """Each rank contributes rank+1; every element must come back as 1+2+…+world."""
        buf.fill_(self.rank + 1)
        out = reduce()
        expected = self.world * (self.world + 1) / 2
        ok = bool((out == expected).all().item())
        return self.agree_max([0.0 if ok else 1.0])[0] == 0.0

    def warm_up(self) -> int:
        """Allreduce small messages until `warmup_s` has passed on every rank: the first calls
        after start-up pay for lazy set-up and idle clocks, which no size should be charged.
        Through the process group (each size then warms the kernel it times itself)."""
        plain = DistOp(self)
        buf = plain.buffer(4)
        done, started = 0, time.perf_counter()
        while True:
            self.timed(lambda: plain.run(buf), 10)
            done += 10
            if self.agree_max([time.perf_counter() - started])[0] >= self.cfg["warmup_s"]:
                return done

    def eager(self, buf: Any, budget_s: float) -> Record:
        def run() -> Any:
            return self.op.run(buf)

        self.timed(run, self.cfg["warmup"])
        estimate = self.agree_max([self.timed(run, 1)])[0]
        reps = max(1, int(self.cfg["repetitions"]))
        iters = iterations_for(
            estimate, budget_s / reps, self.cfg["min_iters"], self.cfg["max_iters"]
        )
        samples = self.repetitions(run, reps, iters)
        record: Record = {"mode": "eager", "iterations": iters * reps, "repetitions": reps}
        record.update(spread(samples))
        record["correct"] = self.sum_is_correct(buf, run)
        return record

    def capture(self, buf: Any, count: int) -> Tuple[Any, Any]:
        """A CUDA graph of `count` allreduces, and the tensor the last one writes."""
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: NCCL's watchdog thread may query events while this thread captures
            context = torch.cuda.graph(graph, capture_error_mode="thread_local")
        except TypeError:  # torch < 2.0 has no capture_error_mode
            context = torch.cuda.graph(graph)
        out = buf
        with context:
            for _ in range(count):
                out = self.op.run(buf)
        return graph, out

    def warm_side_stream(self, buf: Any) -> None:
        """NCCL must have run on a side stream before its kernels can be captured."""
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                self.op.run(buf)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()

    def graph(self, buf: Any, iters: int) -> Record:
        captured, replays = graph_plan(iters)
        error = None
        try:
            self.warm_side_stream(buf)
            timing_graph, _ = self.capture(buf, captured)
            check_graph, check_out = self.capture(buf, 1)
        except Exception as exc:  # a capture that fails is the finding, on any rank
            error = describe(exc)
        if self.agree_max([1.0 if error else 0.0])[0]:
            self.graph_ok = False
            return {"mode": "graph", "error": (error or "capture failed on another rank")[:500]}
        timing_graph.replay()
        samples = [s / captured for s in self.repetitions(timing_graph.replay, replays, 1)]

        def check() -> Any:
            check_graph.replay()
            return check_out

        record: Record = {"mode": "graph", "iterations": captured * replays, "captured": captured}
        record.update(spread(samples), repetitions=replays)
        record["correct"] = self.sum_is_correct(buf, check)
        return record

    def step(self, mode: str, nbytes: int, budget_s: float) -> Record:
        elem = self.torch.tensor([], dtype=self.dtype).element_size()
        numel = max(1, nbytes // elem)
        buf = self.op.buffer(numel)
        if mode == "eager":
            record = self.eager(buf, budget_s)
            self.iterations[nbytes] = record["iterations"] // record["repetitions"]
        else:
            record = self.graph(buf, self.iterations.get(nbytes) or int(self.cfg["max_iters"]))
        record["bytes"] = numel * elem
        return record

    def guarded_step(self, mode: str, nbytes: int, budget_s: float) -> Record:
        """One measurement; an error in it (a size the kernel refuses) is that size's result."""
        try:
            record = self.step(mode, nbytes, budget_s)
            failed = 0.0
        except Exception as exc:  # recorded as this (mode, size)'s error
            record, failed = {"mode": mode, "bytes": nbytes, "error": describe(exc)}, 1.0
        if self.agree_max([failed])[0] and not failed:
            record = {"mode": mode, "bytes": nbytes, "error": "failed on another rank"}
        return record

    def runnable_left(self, steps: List[Tuple[str, int]]) -> int:
        return sum(1 for mode, _ in steps if mode == "eager" or self.graph_ok)

    def run(self, deadline: float) -> Record:
        steps = plan_steps(self.cfg["sizes"], self.graph_ok, self.cfg.get("order", "by_size"))
        for index, (mode, nbytes) in enumerate(steps):
            if mode == "graph" and not self.graph_ok:
                continue
            remaining = deadline - self.agree_max([time.time()])[0]
            if remaining <= 0:
                return {"stopped_early": True, "next_bytes": nbytes, "next_mode": mode}
            budget_s = remaining / max(1, self.runnable_left(steps[index:]))
            record = self.guarded_step(mode, nbytes, budget_s)
            if self.rank == 0:
                emit(self.cfg, record)
        return {"stopped_early": False}


def init(cfg: Record, torch: Any, dist: Any) -> None:
    rank = int(os.environ["RANK"])
    # A file rendezvous, not a TCP port: a free port picked by the parent could be taken by
    # anything on the host before rank 0 binds it (EADDRINUSE); the file lives in the
    # probe's private directory, which the parent removes.
    kwargs: Record = {
        "backend": cfg["backend"],
        "init_method": "file://" + cfg["rendezvous_file"],
        "rank": rank,
        "world_size": int(os.environ["WORLD_SIZE"]),
        "timeout": datetime.timedelta(seconds=cfg["hard_timeout_s"]),
    }
    if cfg["backend"] == "nccl":
        torch.cuda.set_device(rank)
        kwargs["device_id"] = torch.device("cuda", rank)  # eager NCCL init (torch >= 2.3)
    try:
        dist.init_process_group(**kwargs)
    except TypeError:
        kwargs.pop("device_id", None)
        dist.init_process_group(**kwargs)


def versions(torch: Any, cfg: Record) -> Record:
    facts: Record = {"torch_version": str(torch.__version__), "nccl_version": None}
    facts["device_name"] = None
    if cfg["backend"] == "nccl":
        facts["nccl_version"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        facts["device_name"] = torch.cuda.get_device_name(0)
    return facts


def wait_for_go(cfg: Record) -> None:
    """A rank started ahead of its turn (the matrix imports torch for the next variant while the
    current one runs) touches no GPU until the probe writes `go` on its stdin."""
    if not cfg.get("wait_for_go"):
        return
    if int(os.environ["RANK"]) == 0:
        emit(cfg, {"ready": True})
    if not sys.stdin.readline().strip():
        os._exit(0)  # the probe went away or gave up on this variant
    signal.alarm(cfg["turn_timeout_s"])


def measure(cfg: Record, torch: Any, dist: Any) -> None:
    rank = int(os.environ["RANK"])
    init(cfg, torch, dist)
    if rank == 0:
        emit(cfg, dict(versions(torch, cfg), started=True))
    bench = Bench(cfg, torch, dist)
    bench.op = make_op(bench)
    warmed = bench.warm_up()
    # Everyone's clock after the warm-up, agreed: every rank must stop at the same step.
    now = bench.agree_max([time.time()])[0]
    deadline = now + cfg["budget_s"] if cfg.get("budget_s") else cfg["deadline"]
    summary = bench.run(deadline)
    if rank == 0:
        emit(cfg, dict(summary, done=True, warmup_iterations=warmed))
    dist.destroy_process_group()


def main(argv: Optional[List[str]] = None) -> None:
    cfg = json.loads((argv or sys.argv)[1])
    guard(cfg)
    import torch
    import torch.distributed as dist

    wait_for_go(cfg)
    try:
        measure(cfg, torch, dist)
    except Exception as exc:  # a variant NCCL rejects: its error is the result
        if int(os.environ["RANK"]) == 0:
            emit(cfg, {"fatal": describe(exc)})
        raise


if __name__ == "__main__":  # run by _worker_io.PROGRAM, which took the working directory off
    main()
