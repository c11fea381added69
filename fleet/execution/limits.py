"""How many hosts the fan-out works on at once: bound what is scarce, not what is idle.

Two bounds, one per kind of cost:

- handshakes in flight: key exchange and authentication are CPU work on the controller, so they
  are bounded by a multiple of its cores. A host's clock (its deadline) starts when its handshake
  starts, never while it waits for one of these slots.
- open sessions: a host that runs its probes costs the controller one socket and a little memory
  while it waits on remote work. By default every selected host may hold one, within the
  open-file budget (the soft RLIMIT_NOFILE, raised to the hard limit first).

`--concurrency` caps both when given (a bastion or a site policy may need it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from fleet.models import Host

HANDSHAKES_PER_CORE = 16  # a handshake is a few ms of CPU between network round trips
MIN_HANDSHAKES = 16
RESERVED_FDS = 128  # stdio, the run store, logs, the event loop's own descriptors
# Controller file descriptors one open session holds: a socket over SSH (a tunnelled host holds
# only a channel on its bastion's socket, counted as one anyway); stdin/stdout/stderr pipes locally.
FDS_PER_SESSION = {"ssh": 1, "local": 3}
# macOS reports an unlimited hard limit but refuses a soft limit above OPEN_MAX
SOFT_LIMIT_CEILING = 1 << 20


@dataclass(frozen=True)
class FanLimits:
    handshakes: int  # handshakes in flight at once
    sessions: int  # hosts connecting or running at once
    hosts: int  # hosts selected
    open_files: int  # the soft RLIMIT_NOFILE the run works within
    capped_by_open_files: bool  # the budget, not the fleet size or --concurrency, set `sessions`
    workers: int = 1  # processes the hosts are spread over (execution/workers.py); 1: this one

    def describe(self) -> str:
        """One line for the user: what bounds this run."""
        text = f"handshakes ≤ {self.handshakes} at once, sessions ≤ {self.sessions}"
        if self.workers > 1:
            text += f", over {self.workers} worker processes"
        if self.capped_by_open_files:
            text += (
                f" (open-file limit {self.open_files}, `ulimit -n`: the other "
                f"{self.hosts - self.sessions} hosts wait for a free session)"
            )
        return text


def plan_limits(
    hosts: Sequence[Host],
    concurrency: int | None = None,
    handshakes: int | None = None,
    open_files: int | None = None,
) -> FanLimits:
    """The bounds for probing `hosts`. `open_files` defaults to the (raised) soft limit."""
    count = max(1, len(hosts))
    files = raise_open_file_limit() if open_files is None else open_files
    per_session = max((FDS_PER_SESSION.get(h.transport, 1) for h in hosts), default=1)
    budget = max(1, (files - RESERVED_FDS) // per_session)
    wanted = count if concurrency is None else min(count, concurrency)
    sessions = min(wanted, budget)
    shakes = handshakes or default_handshakes()
    if concurrency is not None:
        shakes = min(shakes, concurrency)
    return FanLimits(
        handshakes=max(1, min(shakes, sessions)),
        sessions=sessions,
        hosts=len(hosts),
        open_files=files,
        capped_by_open_files=budget < wanted,
    )


def default_handshakes() -> int:
    """Handshakes in flight for this controller: HANDSHAKES_PER_CORE per usable core."""
    return max(MIN_HANDSHAKES, HANDSHAKES_PER_CORE * usable_cores())


# An inventory file this big likely names enough hosts for workers (2 x MIN_HOSTS_PER_WORKER, at
# 20-100 bytes a host in any of fleet's forms): the workers' seed is started before it is read.
EARLY_SEED_BYTES = 8 * 1024


def early_seed_workers(
    inventory: str | os.PathLike[str] | None, limit: str | None, requested: int | None
) -> int | None:
    """How many workers' pipes to start the seed with before `inventory` is read (the most the
    run may deal to: --workers N, or the usable cores); None where the run will likely not
    spread over workers (no inventory file, one under EARLY_SEED_BYTES, a --limit, --workers 1).
    Decided here, by a stat, so that a run that starts no seed loads no worker module."""
    if requested == 1 or limit or inventory is None:
        return None
    try:
        if os.stat(inventory).st_size < EARLY_SEED_BYTES:
            return None
    except OSError:
        return None  # an unreadable inventory is said where it is read; no seed starts early
    return requested or usable_cores()


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # a container's or taskset's share, not the host's
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as far as the system lets us); return the
    soft limit now in force. Where there is no such limit (Windows), a conservative guess."""
    try:
        import resource
    except ImportError:
        return 512
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = SOFT_LIMIT_CEILING if hard == resource.RLIM_INFINITY else hard
    target = min(target, SOFT_LIMIT_CEILING)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return int(soft)  # e.g. macOS below OPEN_MAX: keep what we have
        return int(target)
    return int(min(soft, SOFT_LIMIT_CEILING))
