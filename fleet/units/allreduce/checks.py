"""The allreduce probe's helpers in a host's rule document (docs/rules.md): `_allreduce`, the
headline rows summarised, and `_allreduce_configured`, how the NCCL_ALGO / NCCL_PROTO the host
sets fared in its matrix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleet.checks import HostHelpers
from fleet.units.allreduce.facts import allreduce_summary
from fleet.units.allreduce.matrix import configured_variant, matrix_of

HELPERS = {"_allreduce": "allreduce", "_allreduce_configured": "allreduce"}
# Both follow from the allreduce rows, whose measured fields are masked (fleet.checks.sharing).
PAYLOAD_HELPERS = {"_allreduce": ("allreduce",), "_allreduce_configured": ("allreduce", "nccl")}


def add_helpers(document: dict[str, Any], host: HostHelpers, wanted: Callable[[str], bool]) -> None:
    probes = host.outcome.probes
    allreduce = probes.get("allreduce")
    if wanted("_allreduce") and allreduce is not None and allreduce.status == "ok":
        document["_allreduce"] = host.kept(
            ("_allreduce", id(allreduce.data)), lambda: allreduce_summary(allreduce.data)
        )
    if wanted("_allreduce_configured"):
        nccl = probes.get("nccl")
        slot = ("_allreduce_configured", id(allreduce and allreduce.data), id(nccl and nccl.data))
        env = nccl.data.get("env") if nccl else None
        configured = host.kept(slot, lambda: configured_variant(matrix_of(host.outcome), env))
        if configured is not None:
            document["_allreduce_configured"] = configured
