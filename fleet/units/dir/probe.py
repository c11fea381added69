"""What the controller knows of the dir probe before any host answers: --dir and its findings'
topic (what a module of the torch stack offers)."""

from __future__ import annotations

from fleet.registry.options import ProbeOption

OPTIONS = (
    ProbeOption(
        "dir_modules",
        "--dir",
        "Module whose dir() the dir probe dumps (repeatable).",
        kind="repeat",
        arg="modules",
        metavar="MODULE",
    ),
)
TOPIC = "torch"
TOPIC_RANK = 50
