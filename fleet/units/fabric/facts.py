"""The `fabric` result: not a probe file, but `fleet fabric` gives each host a `fabric` result
(fleet/fabric/run.py host_summary) that sits in its probes like one. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from fleet.analysis.across_runs.measured import (
    BaselineFamily,
    Key,
    Source,
    good_mode,
    metric_for,
    number_or_none,
    probe_source,
)
from fleet.analysis.facts import human_bytes
from fleet.models import HostOutcome, Run

RESULT = "fabric"  # the result's name among a host's probes, and its baseline family's

# Its fact declaration, as a probe file's FACTS would say it: its medians are measurements; the
# per-partner figures and pair counts depend on who was paired with whom, so never divergence.
RESULT_FACTS = {
    "measure": ("busbw_gbps", "latency_us"),
    "volatile": ("partners", "partners.*", "pairs_ok", "pairs_bad"),
}
BETTER_HIGHER = ("busbw_gbps",)


def measurements(data: Mapping[str, Any]) -> dict[str, float]:
    """A host's median over its fabric pairs: busbw at the largest size, latency at the smallest."""
    found: dict[str, float] = {}
    size = human_bytes(data["large_bytes"]) if isinstance(data.get("large_bytes"), int) else "?"
    if isinstance(data.get("busbw_gbps"), (int, float)):
        found[f"fabric {data.get('backend')} {size} busbw_gbps"] = data["busbw_gbps"]
    if isinstance(data.get("latency_us"), (int, float)):
        found[f"fabric {data.get('backend')} latency_us"] = data["latency_us"]
    return found


# ------------------------------------------------------------------------------------ baselines


def fabric_measured(section: Mapping[str, Any], host: str) -> dict[Key, float]:
    """A host's fabric figures: per size, the median over its pairs that ran well."""
    backend = str(section.get("backend"))
    if not good_mode(backend):
        return {}
    per_size: dict[int, list[float]] = {}
    for pair in section.get("pairs") or []:
        if not isinstance(pair, Mapping) or host not in (pair.get("hosts") or ()):
            continue
        if pair.get("status") != "ok" or pair.get("correct") is False:
            continue
        for row in pair.get("sizes") or []:
            size = row.get("bytes") if isinstance(row, Mapping) else None
            if type(size) is not int or size <= 0:
                continue
            metric = metric_for(size)
            value = number_or_none(row.get("time_us" if metric == "latency_us" else metric))
            if value is not None:
                per_size.setdefault(size, []).append(value)
    return {
        Key(RESULT, "", backend, size, metric_for(size)): float(statistics.median(values))
        for size, values in per_size.items()
    }


def _measure(run: Run, outcome: HostOutcome) -> dict[Key, float]:
    return fabric_measured(run.fabric, outcome.name) if isinstance(run.fabric, Mapping) else {}


def _source(run: Run, outcome: HostOutcome) -> Source:
    if run.fabric is None:
        return "not this kind of run", "no fabric results: run `fleet fabric`"
    return probe_source(outcome, RESULT)


BASELINE_FAMILIES = (
    BaselineFamily(
        RESULT,
        "fabric pairs: each host's median over its pairs, latency and bus bandwidth per size",
        _measure,
        _source,
        mode_text="pairs ({})",
    ),
)
