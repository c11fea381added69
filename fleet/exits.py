"""fleet's exit codes: a bitmask (README, "Exit codes"), set from what a command found.

0 all ok; 2 usage or inventory error (nothing contacted; fleet.errors' exit_code); 4 some host not
reached; 8 some probe failed or timed out; 16 drift; 32 a check failed; 64 the run (or a file
asked for) was not kept; 130 interrupted, alone.
"""

from __future__ import annotations

from fleet.models import NOT_REACHED, NOT_USABLE, PROBE_TROUBLE, Run

EXIT_OK, EXIT_USAGE, EXIT_UNREACHED, EXIT_PROBE_FAILED, EXIT_DRIFT = 0, 2, 4, 8, 16
EXIT_CHECK_FAILED = 32  # a rule of severity error failed (with --strict: or was not judged)
EXIT_NOT_KEPT = 64  # the run was probed but could not be saved (or its --json written)
EXIT_INTERRUPTED = 130


def with_bits(code: int, bits: int) -> int:
    """`code` with more bits set, unless it is 130: an interrupted run reports only that."""
    return code if code == EXIT_INTERRUPTED else code | bits


def exit_code(run: Run) -> int:
    """The bits the hosts' statuses set: 4 not reached, 8 probe trouble; 130 if interrupted."""
    if run.interrupted:
        return EXIT_INTERRUPTED
    code = EXIT_OK
    statuses = {o.status for o in run.hosts.values()}
    if statuses & NOT_REACHED:
        code |= EXIT_UNREACHED
    if statuses & PROBE_TROUBLE:
        code |= EXIT_PROBE_FAILED
    return code


def fabric_exit_code(run: Run) -> int:
    """As exit_code, but a host that took no part in `fleet fabric` (reached, yet unable to run
    a rank: no torch, no GPU; the section's `skipped_hosts`) sets 4, as one not reached: nothing
    failed there, nothing was measured. 8 stays for groups that failed and named suspects. A node
    the scheduler reports unusable (drained, down) is skipped too, but sets no bit, as in
    exit_code: it is not part of the usable fleet."""
    if run.interrupted:
        return EXIT_INTERRUPTED
    left_out = set((run.fabric or {}).get("skipped_hosts") or {})
    not_usable = {name for name, o in run.hosts.items() if o.status in NOT_USABLE}
    code = EXIT_UNREACHED if left_out - not_usable else EXIT_OK
    statuses = {o.status for name, o in run.hosts.items() if name not in left_out}
    if statuses & NOT_REACHED:
        code |= EXIT_UNREACHED
    if statuses & PROBE_TROUBLE:
        code |= EXIT_PROBE_FAILED
    return code


def kept_bits(kept: bool) -> int:
    """64 when something asked for (saving, --json, --junit, --html) could not be written."""
    return 0 if kept else EXIT_NOT_KEPT
