"""What rules read about one host: `{probe: data}` for every probe it ran, plus the helpers
(names that start with "_"; docs/rules.md lists them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from fleet.analysis.allreduce_matrix import configured_variant, matrix_of
from fleet.analysis.facts import allreduce_summary
from fleet.models import HostOutcome

# Helpers in a host's document: the probe whose success each needs (None: always there).
HELPERS: Mapping[str, str | None] = {
    "_status": None,
    "_host": None,
    "_args": None,
    "_allreduce": "allreduce",
    "_allreduce_configured": "allreduce",
}
# Per-host results that are not probes but read like one: `fleet fabric` runs give `fabric`.
RESULTS_BESIDE_PROBES = frozenset({"fabric"})


def host_document(
    outcome: HostOutcome,
    probe_args: Mapping[str, Any] | None = None,
    plain: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """What rules read about one host: `{probe: data}` plus the helpers. `plain`: how a payload
    is copied (fleet.checks.sharing copies each payload object once for all its hosts)."""
    copy = plain or plain_copy
    document: dict[str, Any] = {name: copy(r.data) for name, r in outcome.probes.items()}
    document["_status"] = {name: r.status for name, r in outcome.probes.items()}
    document["_host"] = {"name": outcome.name, "status": outcome.status}
    document["_args"] = plain_copy(probe_args or {})
    allreduce = outcome.probes.get("allreduce")
    if allreduce is not None and allreduce.status == "ok":
        document["_allreduce"] = allreduce_summary(allreduce.data)
    nccl = outcome.probes.get("nccl")
    configured = configured_variant(matrix_of(outcome), nccl.data.get("env") if nccl else None)
    if configured is not None:
        document["_allreduce_configured"] = configured
    return document


def plain_copy(value: Any) -> Any:
    """Plain dicts and lists (JMESPath's type checks want them), through a JSON round trip."""
    return json.loads(json.dumps(value, default=str))
