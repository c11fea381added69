"""`fleet fabric`: cross-host allreduce rounds run by the controller, and who is to blame.

plan.py (rounds, ranks, ports) · blame.py (suspect hosts and links) · results.py (the run
document's `fabric` section) · launch.py (the script a host runs) · run.py (async orchestration).
All but run.py are pure.
"""
