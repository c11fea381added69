"""What the controller knows of the allreduce probe before any host answers: its options, its
findings' topic and the baseline families it measures (their figures: facts.py)."""

from __future__ import annotations

from fleet.registry.options import ProbeOption

OPTIONS = (
    ProbeOption(
        "allreduce",
        "--allreduce/--no-allreduce",
        "Run the allreduce timing probe.",
        kind="switch",
        drops=True,
    ),
    ProbeOption("quick", "--quick", "Fewer message sizes and iterations.", arg="quick"),
    ProbeOption(
        "allreduce_matrix",
        "--allreduce-matrix",
        "Also time every NCCL algorithm x protocol and torch symmetric-memory allreduce, "
        "and name the winner per size (per-host timeout at least 300 s).",
        arg="matrix",
        adds=True,
        # the matrix adds up to a minute and a half: 30 s sweep + 60 s matrix + the rest
        least_timeout_s=300.0,
    ),
)
TOPIC = "allreduce"
TOPIC_RANK = 80  # a finding reading several probes is about the one of lowest rank
