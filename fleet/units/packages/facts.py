"""The packages probe's facts as the reports show them."""

from __future__ import annotations

from fleet.registry.keyfacts import KeyFact

KEY_FACTS: tuple[KeyFact, ...] = (("torch (installed)", (("packages", "packages", "torch"),)),)
