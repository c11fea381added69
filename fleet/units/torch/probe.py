"""What the controller knows of the torch probe before any host answers: its findings' topic."""

TOPIC = "torch"
TOPIC_RANK = 30  # a finding reading several probes is about the one of lowest rank
DIVERGENCE = ("arch", "import")  # the cross-host divergence kinds about torch
