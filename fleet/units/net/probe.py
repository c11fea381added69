"""What the controller knows of the net probe before any host answers: its findings' topic."""

TOPIC = "net"
TOPIC_RANK = 75  # a finding reading several probes is about the one of lowest rank
