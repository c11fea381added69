"""The imports probe's facts as the reports show them."""

from __future__ import annotations

from fleet.registry.keyfacts import KeyFact

SYMMETRIC_MEMORY_SPEC = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"

KEY_FACTS: tuple[KeyFact, ...] = (
    ("SymmetricMemory", (("imports", "results", SYMMETRIC_MEMORY_SPEC, "resolved"),)),
)
