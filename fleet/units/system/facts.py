"""The system probe's facts as the reports show them."""

from __future__ import annotations

from fleet.registry.keyfacts import KeyFact

KEY_FACTS: tuple[KeyFact, ...] = (
    ("OS", (("system", "os"),)),
    ("kernel", (("system", "kernel"),)),
    ("CPUs / memory GiB", (("system", "cpu_count"), ("system", "memory_gib"))),
    ("python", (("system", "python", "version"),)),
)
