"""The uptime probe's option, declared once here: `--uptime-whole` asks the probe for whole
seconds (fleet probe and fleet check offer it, fleet.api.ProbeOptions takes it by key)."""

from __future__ import annotations

from fleet.registry.options import ProbeOption

OPTIONS = (
    ProbeOption(
        "uptime_whole",
        "--uptime-whole",
        "The uptime probe rounds its figures to whole seconds.",
        arg="whole",
    ),
)
TOPIC = "uptime"
