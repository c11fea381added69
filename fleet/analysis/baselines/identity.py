"""What a baseline records of a host beside its measurements: the software it measured with (a
cohort's `versions:` in the fleet.baseline/1 file) and, where no probe said what GPUs it has,
the GPUs another probe's own data names. The units that read them say (docs/layers.md): a unit's
facts.py may declare `host_versions(outcome)` and `gpu_identity(outcome)`. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from fleet.models import HostOutcome
from fleet.registry import declaring

# The software a baseline records per cohort (its `versions:`), and how a verdict says each.
VERSIONS = ("torch", "cuda", "nccl", "driver")
VERSION_LABELS = {"torch": "torch", "cuda": "CUDA", "nccl": "NCCL", "driver": "driver"}


def host_versions(outcome: HostOutcome) -> dict[str, str | None]:
    """Each of VERSIONS as the first unit that says it read it (None where none did)."""
    found: dict[str, str | None] = dict.fromkeys(VERSIONS)
    for _, read in declaring("facts", "host_versions"):
        said: Mapping[str, str | None] = read(outcome)
        for name in VERSIONS:
            found[name] = found[name] or said.get(name)
    return found


def gpu_identity(outcome: HostOutcome) -> tuple[str, int] | None:
    """GPU model and count as the first unit that can tell them from its own data says (a run
    with no gpu probe, `-p allreduce`, still places its hosts in their cohorts)."""
    for _, read in declaring("facts", "gpu_identity"):
        identity: tuple[str, int] | None = read(outcome)
        if identity is not None:
            return identity
    return None
