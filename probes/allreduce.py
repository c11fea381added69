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
SHIPS = ("_allreduce_worker.py",)  # files the bundle carries with this probe (never written)
WORKER_FILE = SHIPS[0]

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


# The rank processes run probes/_allreduce_worker.py: a file of its own (linted and type-checked),
# shipped beside this one in the bundle (fleet/execution/bundle.py reads SHIPS) and handed to the
# ranks as `python -c SOURCE`, so nothing is written on the host.
def worker_source() -> str:
    """The worker's text: from the bundle on a host, else from the file beside this one."""
    shipped = globals().get("__shipped__") or {}
    if WORKER_FILE in shipped:
        return str(shipped[WORKER_FILE])
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, WORKER_FILE), encoding="utf-8") as handle:
        return handle.read()


def plan_functions() -> Dict[str, Any]:
    """The worker's namespace without running it (its planning functions, for tests)."""
    namespace: Dict[str, Any] = {"__name__": "fleet_allreduce_worker"}
    exec(compile(worker_source(), WORKER_FILE, "exec"), namespace)
    return namespace


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
    source = worker_source()
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
