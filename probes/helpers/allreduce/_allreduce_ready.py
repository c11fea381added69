"""Whether this host can run the allreduce probe at all: torch importable, torch.distributed with
the backend, and for NCCL at least two CUDA GPUs. Imports torch; runs no CUDA work.

Not a probe (the leading underscore): shipped with the allreduce probe (its `SHIPS`), stdlib
only, Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

from _allreduce_config import Config

# A result's data key: true when the probe cannot apply to this host by its nature (one GPU, where
# an allreduce needs two), so that rules needing it are n/a there rather than not judged. The
# controller reads the same key (fleet/models.py ProbeResult.not_applicable).
NOT_APPLICABLE = "not_applicable"
# One folder per GPU the NVIDIA driver drives; torch (CUDA) counts the same ones unless
# CUDA_VISIBLE_DEVICES narrows them.
DRIVER_GPUS = "/proc/driver/nvidia/gpus"


def describe_error(exc: BaseException) -> str:
    return ("%s: %s" % (type(exc).__name__, exc))[:500]


def readiness(config: Config) -> Tuple[Optional[str], Dict[str, Any]]:
    """(why the benchmark cannot run or None, facts learnt); imports torch, runs no CUDA work.
    A host the driver shows one GPU is answered without torch: importing it and starting CUDA
    only to count one GPU cost a one-GPU host ~3.5 s of every default probe run."""
    if config.backend == "nccl":
        alone = one_gpu_without_torch()
        if alone is not None:
            return alone
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


def one_gpu_without_torch() -> Optional[Tuple[str, Dict[str, Any]]]:
    """readiness's answer for a host whose driver lists exactly one GPU and nothing narrows what
    CUDA sees (CUDA_VISIBLE_DEVICES unset), with torch's version read from its metadata; None:
    ask torch (no driver folder, several GPUs, no torch installed)."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return None
    try:
        count = len(os.listdir(DRIVER_GPUS))
    except OSError:
        return None
    version = _installed_torch_version()
    if count != 1 or version is None:
        return None
    facts = {"torch_version": version, "device_count": 1, NOT_APPLICABLE: True}
    return "only 1 GPU: an allreduce needs 2 or more", facts


def _installed_torch_version() -> Optional[str]:
    try:
        from importlib import metadata

        return metadata.version("torch")
    except Exception:  # not installed, or metadata unreadable: torch itself is asked
        return None


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
    if count < 2:  # by the host's nature, not a fault: its rules are n/a (NOT_APPLICABLE)
        facts[NOT_APPLICABLE] = True
        return "only %d GPU: an allreduce needs 2 or more" % count
    if config.world_size is not None and config.world_size > count:
        return "world_size %d is more than the %d GPUs" % (config.world_size, count)
    return None
