"""What the controller knows of the packages probe before any host answers: its findings' topic."""

TOPIC = "torch"
TOPIC_RANK = 60  # a finding reading several probes is about the one of lowest rank
