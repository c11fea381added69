"""Builds a tiny stdlib-only fake `torch` from a dict, for probe tests on machines without GPUs.

Each stub directory (`torch_<case>/torch/__init__.py`) holds one SPEC and calls `install()`; a test
"host" gets that directory on its PYTHONPATH. Only what the probes ask is faked: versions, the arch
list, devices, peer access and `torch.distributed._symmetric_memory`. `torch.distributed` has no
`init_process_group`, so the allreduce probe must skip instead of starting workers.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any


def _module(name: str, **attributes: Any) -> types.ModuleType:
    """A module registered in sys.modules, so `import torch.cuda.nccl` finds it there."""
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def _cuda(spec: dict[str, Any]) -> types.ModuleType:
    devices = spec["devices"]
    nccl = _module(
        "torch.cuda.nccl",
        version=lambda: tuple(spec["nccl"]),
        is_available=lambda tensors=None: True,
    )
    return _module(
        "torch.cuda",
        nccl=nccl,
        is_available=lambda: bool(devices),
        device_count=lambda: len(devices),
        get_arch_list=lambda: list(spec["arch_list"]),
        get_device_name=lambda index=0: devices[index]["name"],
        get_device_capability=lambda index=0: tuple(devices[index]["capability"]),
        can_device_access_peer=lambda src, dst: bool(spec["p2p"]) and src != dst,
    )


class _SymmetricMemory:
    """Stands in for torch's pybind class; only its presence under a name matters."""


def _distributed(spec: dict[str, Any]) -> types.ModuleType:
    symm = _module(
        "torch.distributed._symmetric_memory",
        _SymmetricMemory=_SymmetricMemory,
        is_nvshmem_available=lambda: bool(spec["nvshmem"]),
    )
    if spec["public_symmetric_memory"]:
        symm.SymmetricMemory = _SymmetricMemory
    return _module("torch.distributed", _symmetric_memory=symm, is_available=lambda: True)


def install(package: dict[str, Any], spec: dict[str, Any]) -> None:
    """Fill the stub package's namespace (its globals()) from `spec`; FLEET_FAKE_TORCH_GPUS
    (`COUNT×NAME`, e.g. `2×NVIDIA GeForce RTX 5090`) gives the same build other GPUs of the
    same compute capability (a host of another model, one stub per torch build)."""
    gpus = os.environ.get("FLEET_FAKE_TORCH_GPUS")
    if gpus:
        count, _, name = gpus.partition("×")
        first = spec["devices"][0]
        spec = {**spec, "devices": [{**first, "name": name}] * int(count)}
    version = _module("torch.version", cuda=spec["cuda"], hip=None, git_version="stub")
    cudnn = _module("torch.backends.cudnn", version=lambda: spec["cudnn"])
    backends = _module("torch.backends", cudnn=cudnn)
    package.update(
        __version__=spec["version"],
        version=version,
        backends=backends,
        cuda=_cuda(spec),
        distributed=_distributed(spec),
    )
