"""The uptime probe on the HTML page: a table of hosts and their hours up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.render.html.markup import esc, row, table

if TYPE_CHECKING:
    from fleet.render.html.page import Report

ANCHOR = "uptime"
NAV = "uptime"
TITLE = "uptime"
INTRO = "how long each host has been up"


def shown(report: Report) -> bool:
    return any(o.probe_ok("uptime") for o in report.run.hosts.values())


def body(report: Report) -> str | None:
    rows = [
        row([esc(name), f"{o.probes['uptime'].data['uptime_s'] / 3600:.1f} h"])
        for name, o in report.run.hosts.items()
        if o.probe_ok("uptime")
    ]
    return table(["host", "up"], rows) if rows else None
