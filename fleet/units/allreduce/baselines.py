"""The allreduce probe's baseline families, its sweep and its matrix (fleet/analysis/across_runs/
measured.py names them), and the software a host measured with: torch, CUDA, NCCL, the driver.
Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fleet.analysis.across_runs.measured import (
    BaselineFamily,
    Key,
    Source,
    probe_source,
    sized_rows,
)
from fleet.models import HostOutcome, Run

PROBE = "allreduce"
MATRIX = "allreduce-matrix"
_CUDA_BUILD = re.compile(r"\+cu(\d+)(\d)$")


def allreduce_measured(data: Mapping[str, Any]) -> dict[Key, float]:
    """The allreduce probe's sweep, and each variant of its matrix when it ran one."""
    return {**dict(sized_rows(data.get("results"), PROBE)), **matrix_measured(data)}


def matrix_measured(data: Mapping[str, Any]) -> dict[Key, float]:
    found: dict[Key, float] = {}
    matrix = data.get("matrix")
    variants = matrix.get("variants") if isinstance(matrix, Mapping) else None
    for variant, entry in sorted(variants.items()) if isinstance(variants, Mapping) else []:
        if isinstance(entry, Mapping) and ":" in str(variant) and " " not in str(variant):
            found.update(sized_rows(entry.get("rows"), MATRIX, str(variant)))
    return found


def _sweep(run: Run, outcome: HostOutcome) -> dict[Key, float]:
    return dict(sized_rows(_data(outcome, PROBE).get("results"), PROBE))


def _matrix(run: Run, outcome: HostOutcome) -> dict[Key, float]:
    return matrix_measured(_data(outcome, PROBE))


def _source(run: Run, outcome: HostOutcome) -> Source:
    if run.fabric is not None and PROBE not in outcome.probes:
        return "not this kind of run", "a `fleet fabric` run: no allreduce probe"
    return probe_source(outcome, PROBE)


def _matrix_source(run: Run, outcome: HostOutcome) -> Source:
    state, why = _source(run, outcome)
    if state == "ran" and not isinstance(_data(outcome, PROBE).get("matrix"), Mapping):
        return "not run", "no allreduce matrix in this run (fleet probe --allreduce-matrix)"
    return state, why


BASELINE_FAMILIES = (
    BaselineFamily(
        PROBE,
        "allreduce latency (below 1 MiB) and bus bandwidth (1 MiB and up), per size and mode",
        _sweep,
        _source,
    ),
    BaselineFamily(
        MATRIX,
        "each variant of the allreduce matrix: latency and bus bandwidth per size and mode",
        _matrix,
        _matrix_source,
        variants=True,
    ),
)


# ------------------------------------------------------------------------------------ versions


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int, float)) and str(value).strip() else None


def _data(outcome: HostOutcome, probe: str) -> Mapping[str, Any]:
    result = outcome.probes.get(probe)
    return result.data if result is not None and isinstance(result.data, Mapping) else {}


def host_versions(outcome: HostOutcome) -> dict[str, str | None]:
    """torch, CUDA (the one torch was built for), NCCL (the one the allreduce ran on, else
    torch's) and the driver, from whichever probes ran; None where none said."""
    allreduce, torch = _data(outcome, PROBE), _data(outcome, "torch")
    nccl, gpu = _data(outcome, "nccl"), _data(outcome, "gpu")
    torch_version = _text(allreduce.get("torch_version")) or _text(torch.get("version"))
    return {
        "torch": torch_version,
        "cuda": _text(torch.get("cuda")) or _cuda_of_build(torch_version),
        "nccl": _text(allreduce.get("nccl_version"))
        or _text(torch.get("nccl_version"))
        or _text(nccl.get("torch_nccl_version")),
        "driver": _text(gpu.get("driver_version")),
    }


def _cuda_of_build(torch_version: str | None) -> str | None:
    """The CUDA a torch wheel was built for, as torch.version.cuda says it: +cu130 → 13.0."""
    match = _CUDA_BUILD.search(torch_version or "")
    return f"{match[1]}.{match[2]}" if match else None


def gpu_identity(outcome: HostOutcome) -> tuple[str, int] | None:
    """GPU model and count from the allreduce probe's own data: what places a host whose run had
    no gpu probe (`-p allreduce`) in its cohort."""
    data = _data(outcome, PROBE)
    name, count = data.get("device_name"), data.get("device_count")
    if isinstance(name, str) and name and type(count) is int and count > 0:
        return name, count
    return None
