"""What the controller knows of the nccl probe before any host answers: its findings' topic."""

TOPIC = "nccl"
TOPIC_RANK = 70  # a finding reading several probes is about the one of lowest rank
DIVERGENCE = ("nccl",)  # the cross-host divergence kinds about NCCL
