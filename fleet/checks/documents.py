"""What rules read about one host: `{probe: data}` for every probe it ran, plus the helpers
(names that start with "_"; docs/rules.md lists them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fleet.analysis import gpubench
from fleet.analysis.allreduce_matrix import configured_variant, matrix_of
from fleet.analysis.facts import allreduce_summary
from fleet.analysis.net import nic_gpus
from fleet.models import HostOutcome

# Helpers in a host's document: the probe whose success each needs (None: always there).
HELPERS: Mapping[str, str | None] = {
    "_status": None,
    "_host": None,
    "_args": None,
    "_allreduce": "allreduce",
    "_allreduce_configured": "allreduce",
    "_nic_gpus": "net",
    "_gpubench": "gpubench",
}
# Per-host results that are not probes but read like one: `fleet fabric` runs give `fabric`.
RESULTS_BESIDE_PROBES = frozenset({"fabric"})


def host_documents(
    outcomes: Mapping[str, HostOutcome], probe_args: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Every host's document; `_gpubench` holds each GPU against its cohort (every GPU of its
    model in the run) too, so these are made together."""
    benches = [o.probes["gpubench"].data for o in outcomes.values() if _gpubench_ok(o)]
    cohort = (gpubench.cohort_medians(benches), gpubench.cohort_sizes(benches))
    return {
        name: host_document(outcome, probe_args.get(name), cohort)
        for name, outcome in outcomes.items()
    }


def _gpubench_ok(outcome: HostOutcome) -> bool:
    result = outcome.probes.get("gpubench")
    return result is not None and result.status == "ok"


def host_document(
    outcome: HostOutcome,
    probe_args: Mapping[str, Any] | None = None,
    gpubench_cohort: tuple[Mapping[str, Mapping[str, float]], Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """What rules read about one host: `{probe: data}` plus the helpers."""
    document: dict[str, Any] = {name: _plain(r.data) for name, r in outcome.probes.items()}
    document["_status"] = {name: r.status for name, r in outcome.probes.items()}
    document["_host"] = {"name": outcome.name, "status": outcome.status}
    document["_args"] = _plain(probe_args or {})
    allreduce = outcome.probes.get("allreduce")
    if allreduce is not None and allreduce.status == "ok":
        document["_allreduce"] = allreduce_summary(allreduce.data)
    nccl = outcome.probes.get("nccl")
    configured = configured_variant(matrix_of(outcome), nccl.data.get("env") if nccl else None)
    if configured is not None:
        document["_allreduce_configured"] = configured
    net = outcome.probes.get("net")
    if net is not None and net.status == "ok":
        gpu = outcome.probes.get("gpu")
        gpu_data = gpu.data if gpu is not None and gpu.status == "ok" else None
        document["_nic_gpus"] = _plain(nic_gpus(net.data, gpu_data))
    if _gpubench_ok(outcome):
        document["_gpubench"] = _plain(
            gpubench_summary(outcome.probes["gpubench"].data, probe_args, gpubench_cohort)
        )
    return document


def gpubench_summary(
    data: Mapping[str, Any],
    probe_args: Mapping[str, Any] | None,
    cohort: tuple[Mapping[str, Mapping[str, float]], Mapping[str, int]] | None,
) -> dict[str, Any]:
    """`_gpubench`: tolerances from the host's probe_args (gpubench.tolerance, .pair_tolerance)."""
    args = (probe_args or {}).get("gpubench") or {}
    medians, sizes = cohort if cohort is not None else (None, None)
    return gpubench.summary(
        data,
        tolerance=float(args.get("tolerance", gpubench.DEFAULT_TOLERANCE)),
        pair_tolerance=float(args.get("pair_tolerance", gpubench.DEFAULT_PAIR_TOLERANCE)),
        cohort=medians,
        cohort_size=sizes,
    )


def _plain(value: Any) -> Any:
    """Plain dicts and lists (JMESPath's type checks want them), through a JSON round trip."""
    return json.loads(json.dumps(value, default=str))
