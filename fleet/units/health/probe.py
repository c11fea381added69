"""What the controller knows of the health probe before any host answers: --sample and its
findings' topic (a rule reading health is about the GPU's health)."""

from __future__ import annotations

from typing import Any

from fleet.registry.options import ProbeOption

# The health probe's own deadline (its TIMEOUT_S) leaves room for a sample this long; a longer
# one raises the probe's timeout with it.
SAMPLE_ROOM_S = 15.0


def sample_args(sample_s: float) -> dict[str, Any]:
    """A sample of `sample_s` seconds as the health probe's arguments."""
    args: dict[str, Any] = {"sample_s": sample_s}
    if sample_s > SAMPLE_ROOM_S:
        args["timeout_s"] = sample_s + 2 * SAMPLE_ROOM_S
    return args


OPTIONS = (
    ProbeOption(
        "sample_s",
        "--sample",
        "The health probe reads its error counters twice, SECONDS apart, and reports what "
        "rose and how fast (per hour): NVLink, PCIe replays and AER, InfiniBand ports, ECC, "
        "clock-event time. Off by default.",
        kind="seconds",
        metavar="SECONDS",
        bounds=(0.5, 60.0),
        to_args=sample_args,
    ),
)
TOPIC = "health"
TOPIC_RANK = 10
# Its success on a host is what lets `fleet drain` resume a node it drained (nothing else proves
# the GPUs healthy again).
DRAIN_WITNESS = True
# It reads the GPUs' model and count too: the second place a host's cohort is found (after gpu).
GPU_SOURCE_RANK = 2
