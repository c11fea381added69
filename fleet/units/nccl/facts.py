"""The nccl probe's facts as the reports show them."""

from __future__ import annotations

from fleet.registry.keyfacts import KeyFact

KEY_FACTS: tuple[KeyFact, ...] = (
    ("NCCL (torch / libraries)", (("nccl", "torch_nccl_version"), ("nccl", "libraries"))),
    ("NCCL_* set", (("nccl", "env"),)),
)
