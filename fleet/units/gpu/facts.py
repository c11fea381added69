"""The gpu probe's facts as the reports show them."""

from __future__ import annotations

from fleet.registry.keyfacts import KeyFact

KEY_FACTS: tuple[KeyFact, ...] = (
    ("GPU driver / CUDA", (("gpu", "driver_version"), ("gpu", "cuda_driver_version"))),
    ("GPUs", (("gpu", "gpu_count"), ("gpu", "gpus", 0, "name"))),
    ("compute capability", (("gpu", "gpus", 0, "compute_capability"),)),
    ("interconnect", (("gpu", "interconnect"),)),
)
