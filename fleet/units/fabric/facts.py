"""The `fabric` result: not a probe file, but `fleet fabric` gives each host a `fabric` result
(fleet/fabric/run.py host_summary) that sits in its probes like one. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.analysis.facts import human_bytes

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
