"""The uptime probe's key fact."""

from __future__ import annotations

from fleet.units.keyfacts import KeyFact

KEY_FACTS: tuple[KeyFact, ...] = (("uptime s", (("uptime", "uptime_s"),)),)
