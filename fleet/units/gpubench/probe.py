"""What the controller knows of the gpubench probe before any host answers: it is opt-in (about
30 s of every GPU at full load), its options and its findings' topic."""

from __future__ import annotations

from fleet.registry.options import ProbeOption

OPT_IN = True  # not in the default set: --gpubench or -p gpubench runs it
OPTIONS = (
    ProbeOption(
        "gpubench",
        "--gpubench",
        "Also run the opt-in gpubench probe: every GPU's matmul, memory and host-copy speed and "
        "every GPU pair's peer copies, all at once, scored against the best on the host "
        "(about 30 s; per-host timeout at least 180 s).",
        adds=True,
        least_timeout_s=180.0,  # its 30 s budget after the allreduce's 30 s
    ),
    ProbeOption("quick", "--quick", "Fewer message sizes and iterations.", arg="quick"),
)
TOPIC = "gpubench"
TOPIC_RANK = 90
