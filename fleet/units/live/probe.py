"""What the controller knows of the live probe before any host answers: its findings' topic."""

TOPIC = "live"
TOPIC_RANK = 20  # a finding reading several probes is about the one of lowest rank
COMMAND = "jobs"  # the command that runs this probe alone (`fleet jobs`)
