"""Baselines: known-good runs turned into bands (build), written and read as a file (file), and a
run judged against them (judge, drift). Pure."""
