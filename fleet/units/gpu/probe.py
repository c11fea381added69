"""What the controller knows of the gpu probe before any host answers: its findings' topic."""

TOPIC = "gpu"
TOPIC_RANK = 100  # a finding reading several probes is about the one of lowest rank
