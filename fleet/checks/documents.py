"""What rules read about one host: `{probe: data}` for every probe it ran, plus the helpers
(names that start with "_"; docs/rules.md lists them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
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
    cohort = gpubench_cohort(outcomes)
    return {
        name: host_document(outcome, probe_args.get(name), cohort)
        for name, outcome in outcomes.items()
    }


def gpubench_cohort(
    outcomes: Mapping[str, HostOutcome],
) -> tuple[Mapping[str, Mapping[str, float]], Mapping[str, int]]:
    """Every GPU of each model in the run: what `_gpubench` holds each host's GPUs against."""
    benches = [o.probes["gpubench"].data for o in outcomes.values() if o.probe_ok("gpubench")]
    return (gpubench.cohort_medians(benches), gpubench.cohort_sizes(benches))


def host_document(
    outcome: HostOutcome,
    probe_args: Mapping[str, Any] | None = None,
    gpubench_cohort: tuple[Mapping[str, Mapping[str, float]], Mapping[str, int]] | None = None,
    plain: Callable[[Any], Any] | None = None,
    roots: Collection[str] | None = None,
    memo: dict[Any, Any] | None = None,
) -> dict[str, Any]:
    """What rules read about one host: `{probe: data}` plus the helpers. fleet.checks.sharing
    passes how a payload is copied (`plain`: once per payload object for all its hosts), the only
    keys a rule reads (`roots`: None, all) and where helpers computed from a payload are kept
    (`memo`, by the payload objects' ids)."""
    copy = plain or plain_copy
    wanted: Callable[[str], bool] = (lambda _: True) if roots is None else roots.__contains__
    probes = outcome.probes
    document: dict[str, Any] = {name: copy(r.data) for name, r in probes.items() if wanted(name)}
    if wanted("_status"):
        document["_status"] = {name: r.status for name, r in probes.items()}
    if wanted("_host"):
        document["_host"] = {"name": outcome.name, "status": outcome.status}
    if wanted("_args"):
        document["_args"] = plain_copy(probe_args or {})
    allreduce = probes.get("allreduce")
    if wanted("_allreduce") and allreduce is not None and allreduce.status == "ok":
        document["_allreduce"] = _kept(
            memo, ("_allreduce", id(allreduce.data)), lambda: allreduce_summary(allreduce.data)
        )
    if wanted("_allreduce_configured"):
        nccl = probes.get("nccl")
        slot = ("_allreduce_configured", id(allreduce and allreduce.data), id(nccl and nccl.data))
        configured = _kept(
            memo,
            slot,
            lambda: configured_variant(matrix_of(outcome), nccl.data.get("env") if nccl else None),
        )
        if configured is not None:
            document["_allreduce_configured"] = configured
    net = probes.get("net")
    if wanted("_nic_gpus") and net is not None and net.status == "ok":
        gpu = probes.get("gpu")
        gpu_data = gpu.data if gpu is not None and gpu.status == "ok" else None
        document["_nic_gpus"] = _kept(
            memo,
            ("_nic_gpus", id(net.data), id(gpu_data)),
            lambda: plain_copy(nic_gpus(net.data, gpu_data)),
        )
    bench = probes.get("gpubench")
    if wanted("_gpubench") and bench is not None and bench.status == "ok":
        # the cohort is the run's, the same for every host judged together
        document["_gpubench"] = _kept(
            memo,
            ("_gpubench", id(bench.data), id(probe_args), id(gpubench_cohort)),
            lambda: plain_copy(gpubench_summary(bench.data, probe_args, gpubench_cohort)),
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


def _kept(memo: dict[Any, Any] | None, slot: Any, make: Callable[[], Any]) -> Any:
    if memo is None:
        return make()
    if slot not in memo:
        memo[slot] = make()
    return memo[slot]


def plain_copy(value: Any) -> Any:
    """Plain dicts and lists (JMESPath's type checks want them), through a JSON round trip."""
    return json.loads(json.dumps(value, default=str))
