"""torch build facts: versions, compiled arch list vs each GPU, peer access, SymmetricMemory."""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from _bounded_text import describe_error

SHIPS = ("_bounded_text.py",)  # helpers the bundle carries with this probe
TIMEOUT_S = 120  # `import torch` takes ~4 s cold on a GPU host, far more on a busy NFS home
# Not PRELOADed: a process that has initialised CUDA cannot fork CUDA users, so this probe imports
# torch itself, in its own process, while the runner starts CUDA's initialisation in a thread
# beside the import (probes/runner/_host_runner.py, start_cuda_init): ~0.2 s off every GPU host's run.
INITS_CUDA = True
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py).
FACTS = {
    "sets": ["arch_list"],
    "volatile": ["query_errors", "cuda_visible_devices"],
    # the GPUs as torch sees them: unlike between cohorts by nature (whether torch can run on
    # them, arch_supported, is not: fleet/analysis/across_hosts/check_grade.py)
    "hardware": [
        "device_count",
        "devices",
        "devices[*].index",
        "devices[*].name",
        "devices[*].capability",
        "devices[*].arch_matched",
        "p2p_access.*",
    ],
}

_ARCH_RE = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")


class ArchEntry(NamedTuple):
    """One entry of torch.cuda.get_arch_list(): `sm_90a` → kind sm, (9, 0), suffix a."""

    text: str
    kind: str  # "sm" = compiled machine code (cubin), "compute" = PTX the driver can JIT
    capability: Tuple[int, int]
    suffix: str  # "" portable, "a" this exact arch only, "f" this family (same major)


class ArchJudgement(NamedTuple):
    arch_supported: bool
    ptx_fallback: bool
    matched: Optional[str]  # the arch list entry whose machine code runs on the device


def parse_arch_entry(text: str) -> Optional[ArchEntry]:
    """`sm_120a` → ArchEntry(kind="sm", capability=(12, 0), suffix="a"); unknown text → None."""
    match = _ARCH_RE.match(text.strip())
    if not match or len(match.group(2)) < 2:
        return None
    digits = match.group(2)
    return ArchEntry(text, match.group(1), (int(digits[:-1]), int(digits[-1])), match.group(3))


def cubin_runs_on(entry: ArchEntry, device: Tuple[int, int]) -> bool:
    """Machine code runs on later minors of its own major only; `a` code only on its exact arch."""
    if entry.suffix == "a":
        return entry.capability == device
    return entry.capability[0] == device[0] and entry.capability[1] <= device[1]


def ptx_jits_on(entry: ArchEntry, device: Tuple[int, int]) -> bool:
    """Portable PTX JITs on any later GPU; `a`/`f` PTX is bound like its machine code."""
    if entry.suffix:
        return cubin_runs_on(entry, device)
    return entry.capability <= device


def judge_arch(arch_list: List[str], device: Tuple[int, int]) -> ArchJudgement:
    """Can this torch build run kernels on a GPU of capability `device`?

    torch's own `_check_cubins` warns only when no `sm_` entry shares the device's major;
    this judgement is stricter about minors (sm_86 code does not run on 8.0) and suffixes.
    """
    entries = [e for e in (parse_arch_entry(t) for t in arch_list) if e is not None]
    cubins = [e for e in entries if e.kind == "sm" and cubin_runs_on(e, device)]
    exact = [e for e in cubins if e.capability == device]
    best = exact or sorted(cubins, key=lambda e: e.capability, reverse=True)
    ptx = any(e.kind == "compute" and ptx_jits_on(e, device) for e in entries)
    return ArchJudgement(bool(cubins), ptx, best[0].text if best else None)


def capability_text(capability: Tuple[int, int]) -> str:
    return "%d.%d" % (capability[0], capability[1])


def _safely(call: Callable[[], Any], errors: Dict[str, str], key: str) -> Any:
    """Run one torch query; a failure becomes an entry in `errors`, not a crash of the probe."""
    try:
        return call()
    except (Exception, SystemExit) as exc:
        errors[key] = describe_error(exc)
        return None


def version_text(version: Any) -> Optional[str]:
    """(2, 26, 2) → "2.26.2"; 2026 stays "2026"; None stays None."""
    if version is None:
        return None
    if isinstance(version, (tuple, list)):
        return ".".join(str(part) for part in version)
    return str(version)


def _device_facts(torch: Any, index: int, arch_list: List[str], errors: Dict[str, str]) -> Dict:
    capability = _safely(
        lambda: tuple(torch.cuda.get_device_capability(index)), errors, "device_%d" % index
    )
    name = _safely(lambda: torch.cuda.get_device_name(index), errors, "device_%d_name" % index)
    device: Dict[str, Any] = {
        "index": index,
        "name": name,
        "capability": None,
        "arch_supported": None,
        "ptx_fallback": None,
        "arch_matched": None,
    }
    if capability is not None:
        judgement = judge_arch(arch_list, (int(capability[0]), int(capability[1])))
        device.update(
            capability=capability_text(capability),
            arch_supported=judgement.arch_supported,
            ptx_fallback=judgement.ptx_fallback,
            arch_matched=judgement.matched,
        )
    return device


def _peer_access(torch: Any, count: int, errors: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    table: Dict[str, Dict[str, Any]] = {}
    for src in range(count):
        row = table.setdefault(str(src), {})
        for dst in range(count):
            if src != dst:
                row[str(dst)] = _can_access_peer(torch, src, dst, errors)
    return table


def _can_access_peer(torch: Any, src: int, dst: int, errors: Dict[str, str]) -> Any:
    return _safely(
        lambda: bool(torch.cuda.can_device_access_peer(src, dst)), errors, "p2p_%d_%d" % (src, dst)
    )


def _symmetric_memory(errors: Dict[str, str]) -> Dict[str, Any]:
    facts: Dict[str, Any] = {
        "module_importable": False,
        "class_name": None,
        "nvshmem_available": None,
    }
    import importlib

    module = _safely(
        lambda: importlib.import_module("torch.distributed._symmetric_memory"),
        errors,
        "symmetric_memory",
    )
    if module is None:
        return facts
    facts["module_importable"] = True
    # torch renamed the class back and forth; the public name wins when both exist.
    facts["class_name"] = next(
        (n for n in ("SymmetricMemory", "_SymmetricMemory") if hasattr(module, n)), None
    )
    is_nvshmem = getattr(module, "is_nvshmem_available", None)
    if is_nvshmem is not None:
        facts["nvshmem_available"] = _safely(lambda: bool(is_nvshmem()), errors, "nvshmem")
    return facts


def _triton_version() -> Optional[str]:
    """From the package metadata: importing triton costs seconds and may touch the GPU."""
    try:
        from importlib import metadata

        return metadata.version("triton")
    except Exception:
        return None


def _build_facts(torch: Any, errors: Dict[str, str]) -> Dict[str, Any]:
    cuda: Any = getattr(torch, "cuda", None)
    version = getattr(torch, "version", None)
    return {
        "version": version_text(getattr(torch, "__version__", None)),
        "cuda": getattr(version, "cuda", None),
        "hip": getattr(version, "hip", None),
        "git_version": getattr(version, "git_version", None),
        "cudnn": _safely(lambda: torch.backends.cudnn.version(), errors, "cudnn"),
        "nccl_version": version_text(_safely(lambda: cuda.nccl.version(), errors, "nccl")),
        "arch_list": list(_safely(lambda: cuda.get_arch_list(), errors, "arch_list") or []),
        "cxx11_abi": _safely(lambda: bool(torch._C._GLIBCXX_USE_CXX11_ABI), errors, "cxx11_abi"),
    }


def facts_from_torch(torch: Any) -> Dict[str, Any]:
    """Everything asked of an imported torch; each failed query lands in `query_errors`."""
    errors: Dict[str, str] = {}
    data = _build_facts(torch, errors)
    available = bool(_safely(lambda: torch.cuda.is_available(), errors, "cuda_available"))
    count = int(_safely(lambda: torch.cuda.device_count(), errors, "device_count") or 0)
    usable = count if available else 0  # without usable CUDA, per-device queries only raise
    data.update(
        cuda_available=available,
        device_count=count,
        devices=[_device_facts(torch, i, data["arch_list"], errors) for i in range(usable)],
        p2p_access=_peer_access(torch, usable, errors),
        symmetric_memory=_symmetric_memory(errors),
        triton_version=_triton_version(),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),  # under Slurm: the task's GPUs
        query_errors=errors,
    )
    return data


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Import torch (the thing probed) here, never at module level."""
    try:
        import torch
    except (Exception, SystemExit) as exc:
        return {"ok": False, "data": {}, "error": "torch not importable: " + describe_error(exc)}
    return {"ok": True, "data": facts_from_torch(torch), "error": None}


if __name__ == "__main__":
    import json
    import sys

    del sys.path[0]  # so `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
