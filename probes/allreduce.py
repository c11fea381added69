"""Allreduce latency and bus bandwidth across the GPUs of this host, eager and CUDA-graph mode.

With the `matrix` option it also answers "which allreduce works here, and which wins": NCCL with
each algorithm × protocol, and torch's symmetric-memory kernels, each in processes of its own with
a deadline of its own (see run_matrix).
"""

from __future__ import annotations

import contextlib
import importlib
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
TIMEOUT_S = 200  # backstop only: the probe ends itself at its budgets (30 s, +60 s for the matrix)
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py): the timing
# rows are measurements (compared within cohorts, fleet/analysis/across_hosts/diff.py), never plain divergence.
# The matrix's facts are its winners per mode and size and each variant's status and the places it
# failed (`failed_at`, compared item by item); its timings and error texts are detail.
FACTS = {
    "measure": ["results"],
    "volatile": [
        "elapsed_s",
        "matrix.elapsed_s",
        "matrix.variants.*.rows",
        "matrix.variants.*.error",
        "matrix.variants.*.failures",
        "matrix.variants.*.elapsed_s",
    ],
    "sets": ["matrix.variants.*.failed_at"],
    "hardware": ["device_count", "world_size"],  # one rank per GPU: as many as the machine has
}
SHIPS = ("_allreduce_worker.py",)  # files the bundle carries with this probe (never written)
WORKER_FILE = SHIPS[0]

MARKER = "FLEET_ALLREDUCE "  # rank 0's result lines; NCCL_DEBUG output shares that stdout
KiB, MiB = 1 << 10, 1 << 20
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}
BACKENDS = ("nccl", "gloo")
MAX_BUDGET_S = TIMEOUT_S - 20  # leave the runner's backstop room to see the probe end itself
# NVLink multicast stays off in NCCL, torch's symmetric memory and NVSHMEM, in every rank, always:
# the lent machines' policy, and nothing here may call cuMulticastCreate. Options cannot change it.
FORCED_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
OPTION_ENV_PREFIXES = ("NCCL_", "TORCH_", "NVSHMEM_", "GLOO_")
REPORTED_ENV_PREFIXES = ("NCCL_", "TORCH_", "NVSHMEM_", "GLOO_", "CUDA_")
STDERR_TAIL_LINES = 12
MAX_ERROR_CHARS = 1500
EAGER_REPETITIONS = 7  # timed samples per size: the median is reported, with min and max

# The matrix. NVLS and NVLSTree need NVLink multicast: never run, whatever the options say.
NCCL_ALGOS = ("Ring", "Tree", "CollnetDirect", "CollnetChain", "PAT")
MULTICAST_ALGOS = ("NVLS", "NVLSTree")
NCCL_PROTOS = ("LL", "LL128", "Simple")
PAT_SINCE = (2, 23)  # NCCL release that added the PAT algorithm
SYMM_MEM_KERNELS = ("one_shot_all_reduce", "two_shot_all_reduce_")  # never multimem_*
SYMM_MEM_MODULES = ("torch.distributed._symmetric_memory", "torch.distributed.symmetric_memory")
MATRIX_SIZES = (8, 64 * KiB, MiB, 16 * MiB, 256 * MiB)
MATRIX_KEYS = ("budget_s", "variant_timeout_s", "algos", "protos", "symm_mem")


class Matrix(NamedTuple):
    budget_s: float  # the whole matrix; variants not reached are "not_run" (stopped early)
    variant_timeout_s: float  # one variant, start-up included: a hang costs at most this
    algos: Tuple[str, ...]
    protos: Tuple[str, ...]
    symm_mem: bool


class Config(NamedTuple):
    enabled: bool
    quick: bool
    backend: str
    world_size: Optional[int]  # None: every GPU (nccl) or 2 processes (gloo)
    max_bytes: int
    dtype: str
    time_budget_s: float
    env: Dict[str, str]  # NCCL_*/TORCH_*… set for the workers from options, nothing else
    matrix: Optional[Matrix] = None


class Variant(NamedTuple):
    """One allreduce implementation of the matrix, run in processes of its own."""

    name: str  # "nccl:Ring/LL", "symm_mem:one_shot_all_reduce", "nccl:default"
    op: str  # what the worker calls: "dist" (torch.distributed) or "symm_mem:<kernel>"
    env: Dict[str, str]  # set on top of the ranks' environment (NCCL_ALGO, NCCL_PROTO)
    source: Optional[str] = None  # the ranks' program; None: probes/_allreduce_worker.py


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
    """A worker's `{"mode", "bytes", "seconds", "correct"}` → a result row, or None if malformed.

    `seconds` is the median of the repetitions; latency_us_min/max are their fastest and slowest."""
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
        "latency_us_min": _microseconds(record.get("seconds_min"), seconds),
        "latency_us_max": _microseconds(record.get("seconds_max"), seconds),
        "algbw_gbps": significant(algbw),
        "busbw_gbps": significant(busbw_gbps(algbw, world_size)),
        "correct": record.get("correct") is True,
        "iterations": record.get("iterations"),
        "repetitions": record.get("repetitions"),
    }


def _microseconds(value: Any, default: float) -> float:
    seconds = value if isinstance(value, (int, float)) and value > 0 else default
    return significant(seconds * 1e6)


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
    config = Config(
        enabled=bool(options.get("enabled", True)),
        quick=quick,
        backend=backend,
        world_size=_int_option(options, "world_size", None, 2, 1024),
        max_bytes=_int_option(options, "max_bytes", default_max, 8, 16 * 1024 * MiB) or default_max,
        dtype=dtype,
        time_budget_s=_number_option(options, "time_budget_s", 30.0, 5.0, MAX_BUDGET_S),
        env=_env_option(options.get("env", {})),
        matrix=_matrix_option(options.get("matrix")),
    )
    if config.matrix and config.time_budget_s + config.matrix.budget_s > MAX_BUDGET_S:
        raise ValueError(
            "time_budget_s + matrix budget_s must be at most %g, got %g + %g"
            % (MAX_BUDGET_S, config.time_budget_s, config.matrix.budget_s)
        )
    return config


def _matrix_option(value: Any) -> Optional[Matrix]:
    """`matrix: true`, or an object of MATRIX_KEYS; false or absent: no matrix."""
    if value is None or value is False:
        return None
    settings = {} if value is True else value
    if not isinstance(settings, dict) or set(settings) - set(MATRIX_KEYS):
        raise ValueError(
            "matrix must be true, false or an object with %s, got %r"
            % (", ".join(MATRIX_KEYS), value)
        )
    return Matrix(
        budget_s=_number_option(settings, "budget_s", 60.0, 5.0, MAX_BUDGET_S),
        variant_timeout_s=_number_option(settings, "variant_timeout_s", 15.0, 3.0, MAX_BUDGET_S),
        algos=_names_option(settings, "algos", NCCL_ALGOS),
        protos=_names_option(settings, "protos", NCCL_PROTOS),
        symm_mem=bool(settings.get("symm_mem", True)),
    )


def _names_option(settings: Dict[str, Any], key: str, known: Tuple[str, ...]) -> Tuple[str, ...]:
    names = settings.get(key, list(known))
    if not isinstance(names, list):
        raise ValueError("matrix %s must be a list of %s, got %r" % (key, ", ".join(known), names))
    for name in names:
        if name in MULTICAST_ALGOS:
            raise ValueError("matrix algos: %s needs NVLink multicast, which stays off" % name)
        if name not in known:
            raise ValueError("matrix %s: %r is not one of %s" % (key, name, ", ".join(known)))
    return tuple(names)


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
    """The host's environment plus the options' variables, then FORCED_ENV over both.

    Returns (environment, the options' names refused because FORCED_ENV fixes them).
    """
    env = dict(base)
    refused = sorted(k for k in requested if k in FORCED_ENV)
    env.update({k: v for k, v in requested.items() if k not in refused})
    env.update(FORCED_ENV)
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
        self.done = threading.Event()  # rank 0 reported its summary: nothing more to wait for
        self.ready = threading.Event()  # rank 0 imported torch and waits for its turn
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
                    record = json.loads(line[len(MARKER) :])
                except ValueError:
                    continue
                self.records.append(record)
                if isinstance(record, dict) and record.get("done"):
                    self.done.set()
                if isinstance(record, dict) and record.get("ready"):
                    self.ready.set()

    def _read_tail(self, index: int) -> None:
        stream = self.procs[index].stderr
        assert stream is not None
        for line in stream:
            self.tails[index].append(line.rstrip()[:500])

    def go(self) -> None:
        """Start ranks that wait for their turn (Variant processes started ahead of it)."""
        for proc in self.procs:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()

    def wait(self, deadline: float, until_done: bool = False) -> str:
        """ "finished", "failed" (a rank exited non-zero: the others would hang) or "deadline".

        With `until_done`, rank 0's summary is enough: the ranks' teardown is not waited for."""
        while True:
            codes = [p.poll() for p in self.procs]
            failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                self.failed_rank = failed[0]  # before kill() gives every rank a non-zero code
                return "failed"
            if all(code == 0 for code in codes) or (until_done and self.done.is_set()):
                return "finished"
            if time.monotonic() >= deadline:
                return "deadline"
            time.sleep(0.05)

    def kill(self) -> None:
        for proc in self.procs:
            kill_group(proc)
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
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


def start_workers(
    world_size: int, env: Dict[str, str], cfg: Dict[str, Any], source: Optional[str] = None
) -> Workers:
    """One `python -c SOURCE CONFIG` per rank; with cfg["wait_for_go"] their stdin is a pipe."""
    source = source or worker_source()
    procs = []
    try:
        for rank in range(world_size):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", source, json.dumps(cfg)],
                    env=rank_environment(env, rank, world_size),
                    stdin=subprocess.PIPE if cfg.get("wait_for_go") else subprocess.DEVNULL,
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
        "warmup_s": 0.1 if config.quick else 0.3,  # once, before the first size
        "repetitions": EAGER_REPETITIONS,
        "order": "by_size",
        "op": "dist",
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
        "step_errors": [_failure(r) for r in records if r.get("mode") == "eager" and "error" in r],
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


# ---------------------------------------------------------------- the matrix: which variants
def plan_variants(config: Config, torch: Any) -> Tuple[List[Variant], Dict[str, str]]:
    """The variants to run here, and those absent here with the reason (never started)."""
    matrix = config.matrix or _matrix_option(True)
    assert matrix is not None
    if config.backend == "gloo":
        return [Variant("gloo:default", "dist", {})], {}
    variants, absent = nccl_variants(matrix, nccl_version_of(torch))
    if matrix.symm_mem:
        found, missing = symm_mem_variants(torch)
        variants += found
        absent.update(missing)
    return variants, absent


def nccl_variants(
    matrix: Matrix, version: Optional[Tuple[int, ...]]
) -> Tuple[List[Variant], Dict[str, str]]:
    """NCCL as the host configures it, then each NCCL_ALGO × NCCL_PROTO asked for. Which of them
    the installed NCCL accepts is learnt by running them: a refusal is that variant's result."""
    variants = [Variant("nccl:default", "dist", {})]
    absent: Dict[str, str] = {}
    for algo in matrix.algos:
        for proto in matrix.protos:
            name = "nccl:%s/%s" % (algo, proto)
            if algo == "PAT" and version is not None and version[:2] < PAT_SINCE:
                absent[name] = "NCCL %s has no PAT algorithm (2.23 and later)" % (
                    ".".join(str(p) for p in version),
                )
                continue
            variants.append(Variant(name, "dist", {"NCCL_ALGO": algo, "NCCL_PROTO": proto}))
    return variants, absent


def nccl_version_of(torch: Any) -> Optional[Tuple[int, ...]]:
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # no NCCL in this torch: the variants will say so themselves
        return None
    return tuple(int(p) for p in version) if isinstance(version, tuple) else None


def symm_mem_variants(torch: Any) -> Tuple[List[Variant], Dict[str, str]]:
    """torch's symmetric-memory allreduce kernels that this torch has (never the multimem ones)."""
    names = ["symm_mem:" + kernel for kernel in SYMM_MEM_KERNELS]
    try:
        module = import_first(SYMM_MEM_MODULES)
    except ImportError as exc:
        return [], {name: "no symmetric memory in this torch: %s" % exc for name in names}
    lacking = [f for f in ("empty", "rendezvous") if not callable(getattr(module, f, None))]
    if lacking:
        why = "%s has no %s" % (module.__name__, " or ".join(lacking))
        return [], {name: why for name in names}
    variants, absent = [], {}
    for kernel, name in zip(SYMM_MEM_KERNELS, names):
        if _has_symm_mem_op(torch, kernel):
            variants.append(Variant(name, name, {}))
        else:
            why = "torch %s has no torch.ops.symm_mem.%s" % (torch.__version__, kernel)
            absent[name] = why
    return variants, absent


def _has_symm_mem_op(torch: Any, kernel: str) -> bool:
    try:
        return hasattr(torch.ops.symm_mem, kernel)
    except Exception:  # an op namespace that cannot even be looked at
        return False


def import_first(names: Tuple[str, ...]) -> Any:
    """The first module of `names` that imports (the imports probe's `a|b` fallback rule)."""
    errors = []
    for name in names:
        try:
            return importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # what is probed may fail in any way
            errors.append(describe_error(exc))
    raise ImportError("; ".join(errors))


# ---------------------------------------------------------------- the matrix: running it
def matrix_sizes(config: Config) -> List[int]:
    return [size for size in MATRIX_SIZES if size <= config.max_bytes] or [config.max_bytes]


def matrix_worker_config(
    config: Config, world_size: int, variant: Variant, rendezvous_file: str
) -> Dict[str, Any]:
    """A variant's ranks: a short sweep, every eager size before any graph one, started ahead of
    their turn (they wait for `go`), measuring for a few seconds of their own deadline."""
    matrix = config.matrix or _matrix_option(True)
    assert matrix is not None
    cfg = worker_config(config, time.time(), world_size, rendezvous_file)
    cfg.update(
        sizes=matrix_sizes(config),
        order="by_mode",
        op=variant.op,
        wait_for_go=True,
        budget_s=min(3.0, 0.3 * matrix.variant_timeout_s),
        turn_timeout_s=int(matrix.variant_timeout_s) + 5,
        hard_timeout_s=int(matrix.budget_s + matrix.variant_timeout_s) + 15,
        warmup=3,
        warmup_s=0.05,
        repetitions=5,
        max_iters=20,
    )
    return cfg


class Launched(NamedTuple):
    variant: Variant
    workers: Optional[Workers]
    error: Optional[str]  # why its ranks could not even start


def launch(
    config: Config, variant: Variant, index: int, env: Dict[str, str], scratch: str, world: int
) -> Launched:
    """Start a variant's ranks; they import torch, then wait for their turn."""
    rendezvous = os.path.join(scratch, "rendezvous-%d" % index)
    cfg = matrix_worker_config(config, world, variant, rendezvous)
    ranks_env = dict(env)
    ranks_env.update(variant.env)
    ranks_env.update(FORCED_ENV)
    try:
        return Launched(variant, start_workers(world, ranks_env, cfg, variant.source), None)
    except OSError as exc:
        return Launched(variant, None, "ranks could not start: " + describe_error(exc))


def run_matrix(
    config: Config, variants: List[Variant], env: Dict[str, str], world: int, scratch: str
) -> Dict[str, Dict[str, Any]]:
    """Each variant in turn, in ranks of its own, under min(its deadline, the matrix's budget).
    The next variant's ranks start (and import torch) while the current one measures."""
    matrix = config.matrix or _matrix_option(True)
    assert matrix is not None
    deadline = time.monotonic() + matrix.budget_s
    results: Dict[str, Dict[str, Any]] = {}
    upcoming: Optional[Launched] = None
    try:
        for index, variant in enumerate(variants):
            current = upcoming or launch(config, variant, index, env, scratch, world)
            upcoming = None
            if time.monotonic() >= deadline:
                _end(current)
                results.update((v.name, not_run(v)) for v in variants[index:])
                break
            if index + 1 < len(variants):
                upcoming = launch(config, variants[index + 1], index + 1, env, scratch, world)
            results[variant.name] = run_variant(current, matrix, deadline, world)
    finally:
        _end(upcoming)
    return results


def _end(launched: Optional[Launched]) -> None:
    if launched is not None and launched.workers is not None:
        launched.workers.kill()


def run_variant(
    launched: Launched, matrix: Matrix, matrix_deadline: float, world: int
) -> Dict[str, Any]:
    begun = time.monotonic()
    workers = launched.workers
    if workers is None:
        return variant_result(launched.variant, "failed", [], launched.error, 0.0, world)
    # Importing torch is not the variant's doing (and overlaps the one before): its own deadline
    # starts at its turn. Waiting for the import is bounded by the matrix's budget only.
    ready = workers.ready.wait(max(0.0, matrix_deadline - time.monotonic()))
    own_deadline = time.monotonic() + matrix.variant_timeout_s
    if ready:
        workers.go()
    try:
        status = workers.wait(min(own_deadline, matrix_deadline), until_done=True)
    finally:
        workers.kill()
    error = workers.failure() if status == "failed" else None
    if status == "deadline":
        status = "timeout" if own_deadline <= matrix_deadline else "stopped"
        error = deadline_error(status, matrix, workers.records)
    elapsed = time.monotonic() - begun
    return variant_result(launched.variant, status, workers.records, error, elapsed, world)


def deadline_error(status: str, matrix: Matrix, records: List[Dict[str, Any]]) -> str:
    steps = [r for r in records if r.get("mode")]
    where = "after %s %s" % (steps[-1]["mode"], size_label(steps[-1]["bytes"])) if steps else ""
    where = where or ("before its first result" if records else "before it started")
    if status == "timeout":
        return "killed at its %gs deadline, %s" % (matrix.variant_timeout_s, where)
    return "stopped: the matrix's %gs budget ran out, %s" % (matrix.budget_s, where)


def not_run(variant: Variant) -> Dict[str, Any]:
    result = variant_result(variant, "not_run", [], None, 0.0, 0)
    result["error"] = "not run: the matrix's budget ran out first"
    return result


def absent_variant(name: str, reason: str) -> Dict[str, Any]:
    op = name if name.startswith("symm_mem:") else "dist"
    return dict(variant_result(Variant(name, op, {}), "absent", [], reason, 0.0, 0))


def variant_result(
    variant: Variant,
    status: str,
    records: List[Dict[str, Any]],
    error: Optional[str],
    elapsed_s: float,
    world: int,
) -> Dict[str, Any]:
    """One variant's entry in the matrix: its rows, where it failed and why, and one status:
    ok · partial (some sizes or modes failed) · failed · timeout · stopped · not_run · absent."""
    rows = [row for row in (result_row(r, world) for r in records) if row is not None]
    failures = [_failure(r) for r in records if r.get("mode") and "error" in r]
    failures += [
        {"mode": r["mode"], "bytes": r["bytes"], "error": "wrong sum"}
        for r in rows
        if not r["correct"]
    ]
    fatal = next((r["fatal"] for r in records if r.get("fatal")), None)
    if status == "finished":
        status = "partial" if failures and rows else ("ok" if rows else "failed")
    failed_at = sorted({"%s %s" % (f["mode"], size_label(f["bytes"])) for f in failures})
    if status in ("failed", "timeout"):
        failed_at.append(status)
    return {
        "op": variant.op,
        "env": dict(variant.env),
        "status": status,
        "error": (fatal or error or _first_error(failures)) if status != "ok" else None,
        "failed_at": failed_at,
        "failures": failures,
        "rows": rows,
        "elapsed_s": round(elapsed_s, 3),
    }


def _failure(record: Dict[str, Any]) -> Dict[str, Any]:
    return {"mode": record["mode"], "bytes": record.get("bytes"), "error": record["error"]}


def _first_error(failures: List[Dict[str, Any]]) -> Optional[str]:
    return str(failures[0]["error"]) if failures else None


def size_label(size: Any) -> str:
    """8 B, 64 KiB, 1 MiB: the keys of the winners (the same words as the controller's)."""
    if not isinstance(size, int):
        return str(size)
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", KiB)):
        if size >= scale and size % scale == 0:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


# ---------------------------------------------------------------- the matrix: who wins
def matrix_winners(variants: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, str]]:
    """Per mode and size, the variant with the lowest correct latency (ties: the first name in
    sort order); every row gets `ratio`, its latency over the winner's (1.0 = the winner)."""
    best: Dict[Tuple[str, int], Tuple[float, str]] = {}
    for name in sorted(variants):
        for row in variants[name].get("rows") or []:
            key = (row["mode"], row["bytes"])
            if row.get("correct") is True and (key not in best or row["latency_us"] < best[key][0]):
                best[key] = (row["latency_us"], name)
    for entry in variants.values():
        for row in entry.get("rows") or []:
            fastest = best.get((row["mode"], row["bytes"]))
            row["ratio"] = significant(row["latency_us"] / fastest[0], 4) if fastest else None
    winners: Dict[str, Dict[str, str]] = {}
    for (mode, size), (_, name) in sorted(best.items()):
        winners.setdefault(mode, {})[size_label(size)] = name
    return winners


def matrix_document(
    config: Config, torch: Any, env: Dict[str, str], world: int, scratch: str
) -> Dict[str, Any]:
    matrix = config.matrix or _matrix_option(True)
    assert matrix is not None
    started = time.monotonic()
    variants, absent = plan_variants(config, torch)
    results = run_matrix(config, variants, env, world, scratch)
    results.update((name, absent_variant(name, why)) for name, why in absent.items())
    return {
        "sizes": matrix_sizes(config),
        "budget_s": matrix.budget_s,
        "variant_timeout_s": matrix.variant_timeout_s,
        "elapsed_s": round(time.monotonic() - started, 3),
        "stopped_early": any(r["status"] in ("stopped", "not_run") for r in results.values()),
        "winners": matrix_winners(results),
        "variants": results,
    }


# ---------------------------------------------------------------- collect
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
        result = sweep(config, started_wall, started, world_size, env, scratch, base)
        if config.matrix:
            torch = sys.modules["torch"]  # imported by readiness()
            base["matrix"] = matrix_document(config, torch, env, world_size, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base["elapsed_s"] = round(time.monotonic() - started, 3)
    return result


def sweep(
    config: Config,
    started_wall: float,
    started: float,
    world_size: int,
    env: Dict[str, str],
    scratch: str,
    base: Dict[str, Any],
) -> Dict[str, Any]:
    """The probe's own measurement: NCCL (or gloo) as configured, the whole size ladder."""
    cfg = worker_config(config, started_wall, world_size, os.path.join(scratch, "rendezvous"))
    try:
        workers = start_workers(world_size, env, cfg)
    except OSError as exc:  # the worker's file missing beside a hand-run probe, or no fork
        return skipped("allreduce workers could not start: " + describe_error(exc), base)
    try:
        status = workers.wait(started + config.time_budget_s)
    finally:
        workers.kill()
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
