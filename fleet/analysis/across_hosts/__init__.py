"""Across hosts, within one run: facts compared host by host, cohorts of like machines, the
majority and the odd ones out, ranked. Pure."""
