"""The allreduce probe's options, checked (a bad one is an error naming it and the valid values),
and the environment its ranks get: the host's, the options' variables, NVLink multicast forced off.

Not a probe (the leading underscore): shipped with the allreduce probe (its `SHIPS`), stdlib
only, Python 3.8, importable by name on the host.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

KiB, MiB = 1 << 10, 1 << 20
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}
BACKENDS = ("nccl", "gloo")
# the probe's TIMEOUT_S (200) less 20: leave the runner's backstop room to see the probe end itself
MAX_BUDGET_S = 180
# NVLink multicast stays off in NCCL, torch's symmetric memory and NVSHMEM, in every rank, always:
# the lent machines' policy, and nothing here may call cuMulticastCreate. Options cannot change it.
FORCED_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
OPTION_ENV_PREFIXES = ("NCCL_", "TORCH_", "NVSHMEM_", "GLOO_")
REPORTED_ENV_PREFIXES = ("NCCL_", "TORCH_", "NVSHMEM_", "GLOO_", "CUDA_")

# The matrix. NVLS and NVLSTree need NVLink multicast: never run, whatever the options say.
NCCL_ALGOS = ("Ring", "Tree", "CollnetDirect", "CollnetChain", "PAT")
MULTICAST_ALGOS = ("NVLS", "NVLSTree")
NCCL_PROTOS = ("LL", "LL128", "Simple")
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
    source: Optional[str] = (
        None  # the ranks' program; None: probes/helpers/allreduce/_allreduce_worker.py
    )


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
        matrix=matrix_option(options.get("matrix")),
    )
    if config.matrix and config.time_budget_s + config.matrix.budget_s > MAX_BUDGET_S:
        raise ValueError(
            "time_budget_s + matrix budget_s must be at most %g, got %g + %g"
            % (MAX_BUDGET_S, config.time_budget_s, config.matrix.budget_s)
        )
    return config


def matrix_option(value: Any) -> Optional[Matrix]:
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
