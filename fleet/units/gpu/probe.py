"""What the controller knows of the gpu probe before any host answers: its findings' topic."""

TOPIC = "gpu"
TOPIC_RANK = 100  # a finding reading several probes is about the one of lowest rank
GPU_SOURCE_RANK = 1  # the first place a host's GPU model and count (its cohort) are read
