"""Findings: what is wrong, where, and what to do — the first thing every command says (issue 38).

One ranked list per run, built from every source that can say something is wrong (sources.py
each feed it): hosts that could not be reached or whose probes failed, failed rules (health,
torch, NCCL, live jobs, networks, gpubench, baselines, fabric), divergence inside a cohort, and
measurements outside their baseline band. model.py is the shape; fold.py folds the findings that
share a cause into one and ranks them. Pure: nothing here touches the network or the terminal.
"""
