"""The uptime probe in the terminal: one line, the longest-running host."""

from __future__ import annotations

from rich.text import Text

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.models import Run


def view(run: Run, diff: FleetDiff) -> Text | None:
    up = {
        n: o.probes["uptime"].data["uptime_s"] for n, o in run.hosts.items() if o.probe_ok("uptime")
    }
    if not up:
        return None
    host = max(up, key=up.__getitem__)
    return Text(f"uptime: {len(up)} host(s), longest up {host}")
