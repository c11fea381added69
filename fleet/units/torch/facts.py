"""The torch probe's facts as the reports show them."""

from __future__ import annotations

from fleet.registry.keyfacts import KeyFact

KEY_FACTS: tuple[KeyFact, ...] = (
    ("torch / CUDA", (("torch", "version"), ("torch", "cuda"))),
    ("torch arch list", (("torch", "arch_list"),)),
    ("GPU0 arch supported", (("torch", "devices", 0, "arch_supported"),)),
)
