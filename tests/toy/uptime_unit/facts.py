"""The uptime probe's key fact and its baseline family: how idle the host was since boot."""

from __future__ import annotations

from fleet.analysis.across_runs.measured import BaselineFamily, Key, Source, probe_source
from fleet.models import HostOutcome, Run
from fleet.registry.keyfacts import KeyFact

KEY_FACTS: tuple[KeyFact, ...] = (("uptime s", (("uptime", "uptime_s"),)),)


def _measure(run: Run, outcome: HostOutcome) -> dict[Key, float]:
    data = outcome.probes["uptime"].data
    return {Key("uptime", "", "proc", 0, "idle_share"): data["idle_s"] / max(data["uptime_s"], 1)}


def _source(run: Run, outcome: HostOutcome) -> Source:
    return probe_source(outcome, "uptime")


BASELINE_FAMILIES = (
    BaselineFamily(
        "uptime",
        "the share of time the host's CPUs were idle since boot",
        _measure,
        _source,
        metrics=("idle_share",),
        sized=False,
    ),
)
