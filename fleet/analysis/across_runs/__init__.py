"""Across runs: what changed between two runs of the same fleet, measurements judged with a
tolerance or a band. Pure."""
