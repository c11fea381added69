"""One rank of the `allreduce` probe: times torch.distributed allreduce, eager and CUDA-graph mode.

Not a probe (the leading underscore): probes/allreduce.py declares it in `SHIPS`, the bundle carries
its text beside the probe's, and the probe starts one `python -c <this text> '<config json>'` per
rank. Nothing is written on the host. Rank 0 prints its results as `MARKER {json}` lines on stdout
(NCCL_DEBUG output shares that stream). The planning functions at the top are pure and tested on
their own (tests/probes/test_allreduce.py). Stdlib and torch only, Python 3.8+.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

Record = Dict[str, Any]


# ---------------------------------------------------------------------------------- planning
def size_budget_s(remaining_s: float, sizes_left: int, modes: int) -> float:
    """Share what is left of the budget evenly among the sizes (and modes) still to measure."""
    return max(0.0, remaining_s) / max(1, sizes_left) / max(1, modes)


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


# ---------------------------------------------------------------------------------- the rank
def watch_parent(parent_pid: int) -> None:
    """An orphaned worker (the probe killed by its runner) must not keep a GPU or a port."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(3)


def emit(cfg: Record, record: Record) -> None:
    sys.stdout.write(cfg["marker"] + json.dumps(record) + "\n")
    sys.stdout.flush()


def describe(exc: BaseException) -> str:
    return ("%s: %s" % (type(exc).__name__, exc))[:500]


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

    def sum_is_correct(self, buf: Any, reduce: Callable[[], Any]) -> bool:
        """Each rank contributes rank+1; every element must come back as 1+2+…+world."""
        buf.fill_(self.rank + 1)
        reduce()
        expected = self.world * (self.world + 1) / 2
        ok = bool((buf == expected).all().item())
        return self.agree_max([0.0 if ok else 1.0])[0] == 0.0

    def eager(self, buf: Any, budget_s: float) -> Record:
        def run() -> None:
            self.dist.all_reduce(buf)

        self.timed(run, self.cfg["warmup"])
        estimate = self.agree_max([self.timed(run, 1)])[0]
        iters = iterations_for(estimate, budget_s, self.cfg["min_iters"], self.cfg["max_iters"])
        self.sync()
        seconds = self.agree_max([self.timed(run, iters)])[0] / iters
        return {
            "mode": "eager",
            "seconds": seconds,
            "iterations": iters,
            "correct": self.sum_is_correct(buf, run),
        }

    def capture(self, buf: Any, count: int) -> Any:
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: NCCL's watchdog thread may query events while this thread captures
            context = torch.cuda.graph(graph, capture_error_mode="thread_local")
        except TypeError:  # torch < 2.0 has no capture_error_mode
            context = torch.cuda.graph(graph)
        with context:
            for _ in range(count):
                self.dist.all_reduce(buf)
        return graph

    def warm_side_stream(self, buf: Any) -> None:
        """NCCL must have run on a side stream before its kernels can be captured."""
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                self.dist.all_reduce(buf)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()

    def graph(self, buf: Any, iters: int) -> Record:
        captured, replays = graph_plan(iters)
        error = None
        try:
            self.warm_side_stream(buf)
            timing_graph, check_graph = self.capture(buf, captured), self.capture(buf, 1)
        except Exception as exc:  # a capture that fails is the finding, on any rank
            error = describe(exc)
        if self.agree_max([1.0 if error else 0.0])[0]:
            self.graph_ok = False
            return {"mode": "graph", "error": (error or "capture failed on another rank")[:500]}
        timing_graph.replay()
        self.sync()
        seconds = self.agree_max([self.timed(timing_graph.replay, replays)])[0]
        return {
            "mode": "graph",
            "seconds": seconds / (captured * replays),
            "iterations": captured * replays,
            "captured": captured,
            "correct": self.sum_is_correct(buf, check_graph.replay),
        }

    def one_size(self, nbytes: int, remaining_s: float, sizes_left: int) -> List[Record]:
        elem = self.torch.tensor([], dtype=self.dtype).element_size()
        numel = max(1, nbytes // elem)
        buf = self.torch.ones(numel, dtype=self.dtype, device=self.device)
        modes = 2 if self.graph_ok else 1
        budget_s = size_budget_s(remaining_s, sizes_left, modes)
        records = [self.eager(buf, budget_s)]
        if self.graph_ok:
            records.append(self.graph(buf, records[0]["iterations"]))
        for r in records:
            r["bytes"] = numel * elem
        return records

    def run(self) -> Record:
        sizes = self.cfg["sizes"]
        for index, nbytes in enumerate(sizes):
            now = self.agree_max([time.time()])[0]
            remaining = self.cfg["deadline"] - now
            if remaining <= 0:
                return {"stopped_early": True, "next_bytes": nbytes}
            for record in self.one_size(nbytes, remaining, len(sizes) - index):
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


def main(argv: Optional[List[str]] = None) -> None:
    cfg = json.loads((argv or sys.argv)[1])
    signal.alarm(cfg["hard_timeout_s"])  # SIGALRM's default action ends the process
    threading.Thread(target=watch_parent, args=(cfg["parent_pid"],), daemon=True).start()
    import torch
    import torch.distributed as dist

    init(cfg, torch, dist)
    if int(os.environ["RANK"]) == 0:
        emit(cfg, dict(versions(torch, cfg), started=True))
    summary = Bench(cfg, torch, dist).run()
    if int(os.environ["RANK"]) == 0:
        emit(cfg, dict(summary, done=True))
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.path and sys.path[0] == "":
        del sys.path[0]  # a torch.py in the working directory must not shadow torch
    main()
