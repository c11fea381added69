"""The allreduce probe's facts: its headline measurements (what the diff compares within cohorts),
the summary rules read as `_allreduce`, and its key fact. Pure.

Headline figures only: the smallest message's latency and the largest message's bus bandwidth per
mode, where run-to-run noise is small relative to 25%."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.analysis.facts import human_bytes, is_number
from fleet.registry.keyfacts import KeyFact
from fleet.units.allreduce.baselines import BASELINE_FAMILIES, gpu_identity, host_versions

# what a baseline keeps of this probe (baselines.py): its families, the software a host measured
# with, its GPUs where the gpu probe did not run (fleet.analysis.baselines.identity asks)
__all__ = ["BASELINE_FAMILIES", "gpu_identity", "host_versions"]

KEY_FACTS: tuple[KeyFact, ...] = (("allreduce busbw max GB/s", (("allreduce", "results"),)),)
BETTER_HIGHER = ("busbw_gbps", "algbw_gbps")  # measurement names ending so: bandwidths


def allreduce_ends(
    data: Mapping[str, Any],
) -> dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Per mode (eager, graph), its rows at the smallest and at the largest message size: the one
    rule for "the allreduce's headline numbers", shared by the diff and the check rules."""
    found: dict[str, list[Mapping[str, Any]]] = {}  # mode → [smallest row, largest row]
    for row in data.get("results") or []:
        if not (type(row) is dict or isinstance(row, Mapping)):
            continue
        size, mode = row.get("bytes"), row.get("mode")
        if not isinstance(size, int) or not mode:
            continue
        ends = found.get(str(mode))
        if ends is None:
            found[str(mode)] = [row, row]
        elif size < ends[0]["bytes"]:  # strictly: the first of equal rows stays, as min() keeps it
            ends[0] = row
        elif size > ends[1]["bytes"]:
            ends[1] = row
    return {mode: (found[mode][0], found[mode][1]) for mode in sorted(found)}


def measurements(data: Mapping[str, Any]) -> dict[str, float]:
    """The measurements the diff compares within cohorts: latency small, busbw large, per mode."""
    found: dict[str, float] = {}
    for mode, (small, large) in allreduce_ends(data).items():
        if is_number(small.get("latency_us")):
            found[f"allreduce {mode} {human_bytes(small['bytes'])} latency_us"] = small[
                "latency_us"
            ]
        if is_number(large.get("busbw_gbps")):
            found[f"allreduce {mode} {human_bytes(large['bytes'])} busbw_gbps"] = large[
                "busbw_gbps"
            ]
    return found


def allreduce_summary(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """What check rules read as `_allreduce`: latency per mode at the smallest size, the best
    busbw at the largest (from allreduce_ends, the same rows the diff compares)."""
    ends = allreduce_ends(data)
    if not ends:
        return None
    smalls = [small for small, _ in ends.values()]
    larges = [large for _, large in ends.values()]
    busbw = [r["busbw_gbps"] for r in larges if is_number(r.get("busbw_gbps"))]
    return {
        "small_bytes": min(r["bytes"] for r in smalls),
        "small_latency_us": {mode: small.get("latency_us") for mode, (small, _) in ends.items()},
        "large_bytes": max(r["bytes"] for r in larges),
        "large_busbw_gbps": max(busbw) if busbw else None,
    }
