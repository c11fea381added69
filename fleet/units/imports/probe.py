"""What the controller knows of the imports probe before any host answers: --import and its
findings' topic (what torch can import)."""

from __future__ import annotations

from fleet.registry.options import ProbeOption

OPTIONS = (
    ProbeOption(
        "imports",
        "--import",
        "Import spec for the imports probe, e.g. 'mod:Name|AltName' (repeatable).",
        kind="repeat",
        arg="specs",
        metavar="SPEC",
    ),
)
TOPIC = "torch"
TOPIC_RANK = 40
