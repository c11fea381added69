"""Allreduce latency and bus bandwidth across the GPUs of this host, eager and CUDA-graph mode."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, List, NamedTuple, Optional, Tuple

RUN_ALONE = True  # it owns every GPU of the host while it runs
TIMEOUT_S = 120  # backstop only: the probe ends itself at `time_budget_s` (30 s by default)
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py): the timing
# rows are measurements (compared within cohorts, fleet/analysis/diff.py), never plain divergence.
FACTS = {"measure": ["results"], "volatile": ["elapsed_s"]}

MARKER = "FLEET_ALLREDUCE "  # rank 0's result lines; NCCL_DEBUG output shares that stdout
KiB, MiB = 1 << 10, 1 << 20
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}
BACKENDS = ("nccl", "gloo")
MAX_BUDGET_S = TIMEOUT_S - 20  # leave the runner's backstop room to see the probe end itself
# The host owner's policy (e.g. multicast off on shared machines): options may never override it.
PROTECTED_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
OPTION_ENV_PREFIXES = ("NCCL_", "TORCH_", "NVSHMEM_", "GLOO_")
REPORTED_ENV_PREFIXES = ("NCCL_", "TORCH_", "NVSHMEM_", "GLOO_", "CUDA_")
STDERR_TAIL_LINES = 12
MAX_ERROR_CHARS = 1500


class Config(NamedTuple):
    enabled: bool
    quick: bool
    backend: str
    world_size: Optional[int]  # None: every GPU (nccl) or 2 processes (gloo)
    max_bytes: int
    dtype: str
    time_budget_s: float
    env: Dict[str, str]  # NCCL_*/TORCH_*… set for the workers from options, nothing else


# ------------------------------------------------------------ pure math (nccl-tests' definitions)
def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth: bytes reduced per second, in GB/s (1e9 bytes/s)."""
    return nbytes / seconds / 1e9


def busbw_gbps(algbw: float, world_size: int) -> float:
    """Bus bandwidth of a ring allreduce: each byte crosses 2(n-1)/n links."""
    return algbw * 2 * (world_size - 1) / world_size


def size_ladder(max_bytes: int, quick: bool, min_bytes: int = 8) -> List[int]:
    """8 B, 16 B, … doubling (×8 with `quick`) up to `max_bytes`, which is always the last size."""
    factor = 8 if quick else 2
    sizes = []
    size = min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= factor
    sizes.append(max_bytes)
    return sizes


def significant(value: float, digits: int = 6) -> float:
    """Round to significant digits: 8 B over gloo is 1e-4 GB/s, which 3 decimals would zero."""
    return float("%.*g" % (digits, value))


def result_row(record: Dict[str, Any], world_size: int) -> Optional[Dict[str, Any]]:
    """A worker's `{"mode", "bytes", "seconds", "correct"}` → a result row, or None if malformed."""
    if record.get("mode") not in ("eager", "graph"):
        return None
    nbytes, seconds = record.get("bytes"), record.get("seconds")
    if not isinstance(nbytes, int) or not isinstance(seconds, (int, float)) or seconds <= 0:
        return None
    algbw = algbw_gbps(nbytes, seconds)
    return {
        "mode": record["mode"],
        "bytes": nbytes,
        "latency_us": significant(seconds * 1e6),
        "algbw_gbps": significant(algbw),
        "busbw_gbps": significant(busbw_gbps(algbw, world_size)),
        "correct": record.get("correct") is True,
        "iterations": record.get("iterations"),
    }


# Planning code runs inside every worker, so it ships as source; tests exec it (plan_functions).
PLAN_SOURCE = r'''
def size_budget_s(remaining_s, sizes_left, modes):
    """Share what is left of the budget evenly among the sizes (and modes) still to measure."""
    return max(0.0, remaining_s) / max(1, sizes_left) / max(1, modes)


def iterations_for(estimate_s, budget_s, min_iters, max_iters):
    """As many timed iterations as fit the budget, at least min_iters, at most max_iters."""
    if estimate_s <= 0:
        return max_iters
    return int(max(min_iters, min(max_iters, budget_s / estimate_s)))


def graph_plan(iterations, max_captured=10, max_replays=5):
    """(allreduces captured in one graph, replays): about `iterations` allreduces in all."""
    captured = max(1, min(iterations, max_captured))
    replays = max(1, min(max_replays, -(-iterations // captured)))
    return captured, replays
'''


def plan_functions() -> Dict[str, Any]:
    """The planning functions the workers run, as a namespace (for tests)."""
    namespace: Dict[str, Any] = {}
    exec(compile(PLAN_SOURCE, "<allreduce plan>", "exec"), namespace)
    return namespace


# ---------------------------------------------------------------- the worker (one per rank)
WORKER_SOURCE = r'''
import datetime
import json
import os
import signal
import sys
import threading
import time

if sys.path and sys.path[0] == "":
    del sys.path[0]  # a torch.py in the working directory must not shadow torch


def watch_parent(parent_pid):
    """An orphaned worker (the probe killed by its runner) must not keep a GPU or a port."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(3)


def emit(cfg, record):
    sys.stdout.write(cfg["marker"] + json.dumps(record) + "\n")
    sys.stdout.flush()


class Bench:
    def __init__(self, cfg, torch, dist):
        self.cfg, self.torch, self.dist = cfg, torch, dist
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.on_cuda = cfg["backend"] == "nccl"
        self.device = torch.device("cuda", self.rank) if self.on_cuda else torch.device("cpu")
        self.dtype = getattr(torch, cfg["dtype"])
        self.graph_ok = bool(cfg["graph"])

    def agree_max(self, values):
        """Every rank gets the same numbers, so every rank takes the same decisions (no hang)."""
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def sync(self):
        self.agree_max([0.0])
        if self.on_cuda:
            self.torch.cuda.synchronize()

    def timed(self, fn, count):
        if not self.on_cuda:
            start = time.perf_counter()
            for _ in range(count):
                fn()
            return time.perf_counter() - start
        start = self.torch.cuda.Event(enable_timing=True)
        end = self.torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(count):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def sum_is_correct(self, buf, reduce):
        """Each rank contributes rank+1; every element must come back as 1+2+…+world."""
        buf.fill_(self.rank + 1)
        reduce()
        expected = self.world * (self.world + 1) / 2
        ok = bool((buf == expected).all().item())
        return self.agree_max([0.0 if ok else 1.0])[0] == 0.0

    def eager(self, buf, budget_s):
        run = lambda: self.dist.all_reduce(buf)
        self.timed(run, self.cfg["warmup"])
        estimate = self.agree_max([self.timed(run, 1)])[0]
        iters = iterations_for(estimate, budget_s, self.cfg["min_iters"], self.cfg["max_iters"])
        self.sync()
        seconds = self.agree_max([self.timed(run, iters)])[0] / iters
        return {"mode": "eager", "seconds": seconds, "iterations": iters,
                "correct": self.sum_is_correct(buf, run)}

    def capture(self, buf, count):
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

    def warm_side_stream(self, buf):
        """NCCL must have run on a side stream before its kernels can be captured."""
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                self.dist.all_reduce(buf)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()

    def graph(self, buf, iters):
        captured, replays = graph_plan(iters)
        error = None
        try:
            self.warm_side_stream(buf)
            timing_graph, check_graph = self.capture(buf, captured), self.capture(buf, 1)
        except Exception as exc:
            error = "%s: %s" % (type(exc).__name__, exc)
        if self.agree_max([1.0 if error else 0.0])[0]:
            self.graph_ok = False
            return {"mode": "graph", "error": (error or "capture failed on another rank")[:500]}
        timing_graph.replay()
        self.sync()
        seconds = self.agree_max([self.timed(timing_graph.replay, replays)])[0]
        return {"mode": "graph", "seconds": seconds / (captured * replays),
                "iterations": captured * replays, "captured": captured,
                "correct": self.sum_is_correct(buf, check_graph.replay)}

    def one_size(self, nbytes, remaining_s, sizes_left):
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

    def run(self):
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


def init(cfg, torch, dist):
    rank = int(os.environ["RANK"])
    # A file rendezvous, not a TCP port: a free port picked by the parent could be taken by
    # anything on the host before rank 0 binds it (EADDRINUSE); the file lives in the
    # probe's private directory, which the parent removes.
    kwargs = {"backend": cfg["backend"], "init_method": "file://" + cfg["rendezvous_file"],
              "rank": rank, "world_size": int(os.environ["WORLD_SIZE"]),
              "timeout": datetime.timedelta(seconds=cfg["hard_timeout_s"])}
    if cfg["backend"] == "nccl":
        torch.cuda.set_device(rank)
        kwargs["device_id"] = torch.device("cuda", rank)  # eager NCCL init (torch >= 2.3)
    try:
        dist.init_process_group(**kwargs)
    except TypeError:
        kwargs.pop("device_id", None)
        dist.init_process_group(**kwargs)


def versions(torch, cfg):
    facts = {"torch_version": str(torch.__version__), "nccl_version": None, "device_name": None}
    if cfg["backend"] == "nccl":
        facts["nccl_version"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        facts["device_name"] = torch.cuda.get_device_name(0)
    return facts


def main():
    cfg = json.loads(sys.argv[1])
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


main()
'''


# ---------------------------------------------------------------- options and environment
def parse_options(options: Dict[str, Any]) -> Config:
    """Validate the options; raise ValueError naming the bad value and the valid ones."""
    backend = options.get("backend", "nccl")
    if backend not in BACKENDS:
        raise ValueError("backend %r is not one of %s" % (backend, ", ".join(BACKENDS)))
    dtype = options.get("dtype", "bfloat16")
    if dtype not in DTYPE_BYTES:
        raise ValueError("dtype %r is not one of %s" % (dtype, ", ".join(DTYPE_BYTES)))
    quick = bool(options.get("quick", False))
    default_max = 256 * MiB if backend == "nccl" else (1 if quick else 4) * MiB
    return Config(
        enabled=bool(options.get("enabled", True)),
        quick=quick,
        backend=backend,
        world_size=_int_option(options, "world_size", None, 2, 1024),
        max_bytes=_int_option(options, "max_bytes", default_max, 8, 16 * 1024 * MiB) or default_max,
        dtype=dtype,
        time_budget_s=_number_option(options, "time_budget_s", 30.0, 5.0, MAX_BUDGET_S),
        env=_env_option(options.get("env", {})),
    )


def _int_option(
    options: Dict[str, Any], key: str, default: Optional[int], low: int, high: int
) -> Optional[int]:
    value = options.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError("%s must be an integer from %d to %d, got %r" % (key, low, high, value))
    return value


def _number_option(
    options: Dict[str, Any], key: str, default: float, low: float, high: float
) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError("%s must be a number from %g to %g, got %r" % (key, low, high, value))
    return float(value)


def _env_option(env: Any) -> Dict[str, str]:
    if not isinstance(env, dict):
        raise ValueError("env must be an object of NCCL_*/TORCH_* variables, got %r" % (env,))
    for key, value in env.items():
        if not str(key).startswith(OPTION_ENV_PREFIXES) or not isinstance(value, (str, int)):
            raise ValueError(
                "env may only set %s variables to strings, got %r=%r"
                % ("/".join(p + "*" for p in OPTION_ENV_PREFIXES), key, value)
            )
    return {str(k): str(v) for k, v in env.items()}


def worker_environment(
    base: Dict[str, str], requested: Dict[str, str]
) -> Tuple[Dict[str, str], List[str]]:
    """The host's environment plus the options' variables; the host's policy variables win.

    Returns (environment, names refused because the host already sets them).
    """
    env = dict(base)
    refused = sorted(k for k in requested if k in PROTECTED_ENV and k in base)
    env.update({k: v for k, v in requested.items() if k not in refused})
    return env, refused


def reported_environment(env: Dict[str, str]) -> Dict[str, str]:
    """The NCCL_*/TORCH_*/… variables in force for the workers (an allow-list: no secrets)."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(REPORTED_ENV_PREFIXES)}


def rank_environment(env: Dict[str, str], rank: int, world_size: int) -> Dict[str, str]:
    ranked = dict(env)
    ranked.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    return ranked


# ---------------------------------------------------------------- can this host run it at all?
def describe_error(exc: BaseException) -> str:
    return ("%s: %s" % (type(exc).__name__, exc))[:500]


def readiness(config: Config) -> Tuple[Optional[str], Dict[str, Any]]:
    """(why the benchmark cannot run or None, facts learnt); imports torch, runs no CUDA work."""
    try:
        import torch
    except (Exception, SystemExit) as exc:
        return "torch not importable: " + describe_error(exc), {}
    facts: Dict[str, Any] = {"torch_version": str(getattr(torch, "__version__", None))}
    if config.backend == "nccl":
        reason = _gpu_problem(torch, config, facts)
        if reason:
            return reason, facts
    return _distributed_problem(torch, config.backend), facts


def _distributed_problem(torch: Any, backend: str) -> Optional[str]:
    try:
        import torch.distributed as dist
    except (Exception, SystemExit) as exc:
        return "torch.distributed not importable: " + describe_error(exc)
    if not callable(getattr(dist, "init_process_group", None)):
        return "torch.distributed has no init_process_group (torch %s is incomplete or a stub)" % (
            getattr(torch, "__version__", "?"),
        )
    check = getattr(dist, "is_%s_available" % backend, None)
    try:
        available = bool(dist.is_available() and check is not None and check())
    except Exception as exc:
        return "torch.distributed %s check failed: %s" % (backend, describe_error(exc))
    return None if available else "torch.distributed backend %s is not available" % backend


def _gpu_problem(torch: Any, config: Config, facts: Dict[str, Any]) -> Optional[str]:
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    except Exception as exc:
        return "CUDA query failed: " + describe_error(exc)
    facts["device_count"] = count
    if not available:
        return "CUDA not available (torch %s); backend gloo runs on CPU" % facts["torch_version"]
    if count < 2:
        return "only %d GPU: an allreduce needs 2 or more" % count
    if config.world_size is not None and config.world_size > count:
        return "world_size %d is more than the %d GPUs" % (config.world_size, count)
    return None


# ---------------------------------------------------------------- running and supervising workers
def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker's whole process group (it leads its own session)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


class Workers:
    """The rank processes, each in its own process group so that a kill takes its children too."""

    def __init__(self, procs: List[subprocess.Popen]) -> None:
        self.procs = procs
        self.failed_rank: Optional[int] = None
        self.records: List[Dict[str, Any]] = []
        self.tails: List[Deque[str]] = [deque(maxlen=STDERR_TAIL_LINES) for _ in procs]
        self.threads = [threading.Thread(target=self._read_records, daemon=True)]
        self.threads += [
            threading.Thread(target=self._read_tail, args=(i,), daemon=True)
            for i in range(len(procs))
        ]
        for thread in self.threads:
            thread.start()

    def _read_records(self) -> None:
        stream = self.procs[0].stdout
        assert stream is not None
        for line in stream:
            if line.startswith(MARKER):
                try:
                    self.records.append(json.loads(line[len(MARKER) :]))
                except ValueError:
                    continue

    def _read_tail(self, index: int) -> None:
        stream = self.procs[index].stderr
        assert stream is not None
        for line in stream:
            self.tails[index].append(line.rstrip()[:500])

    def wait(self, deadline: float) -> str:
        """ "finished", "failed" (a rank exited non-zero: the others would hang) or "deadline"."""
        while True:
            codes = [p.poll() for p in self.procs]
            failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                self.failed_rank = failed[0]  # before kill() gives every rank a non-zero code
                return "failed"
            if all(code == 0 for code in codes):
                return "finished"
            if time.monotonic() >= deadline:
                return "deadline"
            time.sleep(0.05)

    def kill(self) -> None:
        for proc in self.procs:
            kill_group(proc)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        for thread in self.threads:
            thread.join(timeout=2)

    def failure(self) -> str:
        """The first failed rank's exit code and the end of its stderr."""
        if self.failed_rank is None:
            return "workers failed"
        rank = self.failed_rank
        tail = "\n".join(self.tails[rank])[-MAX_ERROR_CHARS:]
        return "rank %d exited with code %s: %s" % (rank, self.procs[rank].returncode, tail)


def start_workers(world_size: int, env: Dict[str, str], cfg: Dict[str, Any]) -> Workers:
    source = PLAN_SOURCE + WORKER_SOURCE
    procs = []
    try:
        for rank in range(world_size):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", source, json.dumps(cfg)],
                    env=rank_environment(env, rank, world_size),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    universal_newlines=True,
                    start_new_session=True,
                )
            )
    except BaseException:
        for proc in procs:  # a rank that could not start: the others would wait for it forever
            kill_group(proc)
        raise
    return Workers(procs)


def worker_config(
    config: Config, started_wall: float, world_size: int, rendezvous_file: str
) -> Dict[str, Any]:
    reserve_s = min(4.0, config.time_budget_s * 0.15)  # for teardown and the last size's overrun
    return {
        "backend": config.backend,
        "dtype": config.dtype,
        "sizes": size_ladder(config.max_bytes, config.quick),
        "graph": config.backend == "nccl",  # CUDA graphs exist only for NCCL on CUDA
        "warmup": 2 if config.quick else 5,
        "min_iters": 2,
        "max_iters": 20 if config.quick else 50,
        "deadline": started_wall + config.time_budget_s - reserve_s,
        "hard_timeout_s": int(config.time_budget_s) + 10,
        "parent_pid": os.getpid(),
        "marker": MARKER,
        "world_size": world_size,
        "rendezvous_file": rendezvous_file,
    }


def default_world_size(config: Config, facts: Dict[str, Any]) -> int:
    if config.world_size is not None:
        return config.world_size
    return 2 if config.backend == "gloo" else int(facts.get("device_count", 0))


# ---------------------------------------------------------------- the result
def summarize(records: List[Dict[str, Any]], world_size: int) -> Dict[str, Any]:
    rows = [row for row in (result_row(r, world_size) for r in records) if row is not None]
    started = next((r for r in records if r.get("started")), {})
    done = next((r for r in records if r.get("done")), {})
    errors = [r["error"] for r in records if r.get("mode") == "graph" and r.get("error")]
    return {
        "nccl_version": started.get("nccl_version"),
        "torch_version": started.get("torch_version"),
        "device_name": started.get("device_name"),
        "results": rows,
        "all_correct": bool(rows) and all(row["correct"] for row in rows),
        "graph_error": errors[0] if errors else None,
        "completed": bool(done),
        "stopped_early": bool(done.get("stopped_early")) or not done,
    }


def outcome(status: str, workers: Workers, data: Dict[str, Any]) -> Dict[str, Any]:
    if status == "failed":
        return {"ok": False, "data": data, "error": workers.failure()}
    if not data["results"]:
        why = "no result within the %gs budget" % data["time_budget_s"]
        return {"ok": False, "data": data, "error": why + " (workers killed)"}
    return {"ok": True, "data": data, "error": None}


def skipped(reason: str, data: Dict[str, Any]) -> Dict[str, Any]:
    return {"ok": False, "data": data, "error": reason}


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    started_wall, started = time.time(), time.monotonic()
    try:
        config = parse_options(options)
    except ValueError as exc:
        return skipped("invalid options: %s" % exc, {})
    base: Dict[str, Any] = {"backend": config.backend, "dtype": config.dtype, "results": []}
    if not config.enabled:
        return skipped("allreduce disabled by options", base)
    reason, facts = readiness(config)
    base.update(facts)
    if reason:
        return skipped(reason, base)
    world_size = default_world_size(config, facts)
    env, refused = worker_environment(dict(os.environ), config.env)
    base.update(
        world_size=world_size,
        env_overrides=reported_environment(env),
        env_from_options=config.env,
        env_refused=refused,
        time_budget_s=config.time_budget_s,
        quick=config.quick,
    )
    try:
        scratch = tempfile.mkdtemp(prefix="fleet-allreduce-")  # 0700: only our ranks meet here
    except OSError as exc:  # a full or read-only temp folder
        why = "cannot create the ranks' rendezvous folder in %s: %s"
        return skipped(why % (tempfile.gettempdir(), exc.strerror or exc), base)
    try:
        cfg = worker_config(config, started_wall, world_size, os.path.join(scratch, "rendezvous"))
        workers = start_workers(world_size, env, cfg)
        try:
            status = workers.wait(started + config.time_budget_s)
        finally:
            workers.kill()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base.update(
        summarize(workers.records, world_size),
        sizes_planned=cfg["sizes"],
        timed_out=status == "deadline",
        elapsed_s=round(time.monotonic() - started, 3),
    )
    return outcome(status, workers, base)


if __name__ == "__main__":
    import json
    import sys

    del sys.path[0]  # so `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
