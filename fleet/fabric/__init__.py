"""`fleet fabric`: cross-host allreduce rounds run by the controller, and who is to blame.

plan.py (rounds, ranks, ports) · isolate.py (`--pairs isolate`'s adaptive planner; isolating.py
runs it) · blame.py (suspect hosts and links) · results.py (what a group's
ranks reported, as one result) · launch.py (the scripts a host runs) · run.py (`FabricRounds`:
async orchestration, each host's turn taken as the fan-out takes it, and the run document's
`fabric` section). All but run.py and isolating.py are pure.
"""
