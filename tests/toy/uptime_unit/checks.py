"""The uptime probe's helper in a host's rule document: `_uptime.hours`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleet.checks import HostHelpers

HELPERS = {"_uptime": "uptime"}


def add_helpers(document: dict[str, Any], host: HostHelpers, wanted: Callable[[str], bool]) -> None:
    result = host.outcome.probes.get("uptime")
    if wanted("_uptime") and result is not None and result.status == "ok":
        document["_uptime"] = {"hours": result.data["uptime_s"] / 3600}
