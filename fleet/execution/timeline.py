"""FLEET_WORKER_TIMELINE=FILE: where a fan-out's wall goes, a few stamps per process.

For bench/workers_scale.py (issue 49): which part of a run over worker processes waits for what.
Each process that runs a fan-out (the single process, or each worker) appends one JSON line to
FILE once its hosts are done: when it started, its hosts' finishing times (rounded to 1 ms, for
the completion curve), how long its hosts waited for a handshake slot, were in their handshake
and in their session (sums), its CPU when its hosts started and when they were done (its event
loop's thread's apart), and how often it slept and was preempted. The seed appends when it
forked; the parent of workers, when it started the seed and when each outcome reached it. Every
time is `time.monotonic()`, one clock for every process of the machine on Linux, so the bench
puts them on the run's own start. Nothing is written, and next to nothing done, where the
variable is unset; a FILE that cannot be written is said once in the log, never a host's error.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

TIMELINE_ENV = "FLEET_WORKER_TIMELINE"


def timeline_file() -> str | None:
    return os.environ.get(TIMELINE_ENV) or None


def own_usage() -> dict[str, float]:
    """This process's CPU so far, and how often it slept (voluntary context switches: each time
    its loop waited on the network with nothing to do) and was preempted (involuntary ones)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
        "sys_s": round(usage.ru_stime, 4),
        "sleeps": usage.ru_nvcsw,
        "preempted": usage.ru_nivcsw,
    }


def append_stamps(path: str, record: Mapping[str, Any]) -> None:
    """One line, one write, O_APPEND: lines of concurrent processes never interleave. A stamp
    is the bench's, never worth a run: a file that cannot be written is logged and dropped."""
    line = json.dumps({"pid": os.getpid(), **record}, separators=(",", ":")) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("%s=%s: cannot write the timeline: %s", TIMELINE_ENV, path, exc.strerror)


@dataclass
class HostClock:
    """One process's stamps over its hosts (made only when FLEET_WORKER_TIMELINE is set)."""

    path: str
    role: str  # "fanout": a FanOut's hosts; "relay": the parent of workers; "seed"
    started: float = field(default_factory=time.monotonic)
    cpu_before: float = field(default_factory=lambda: own_usage()["cpu_s"])  # the process's start
    # this thread's (the event loop's): other threads' work (the rule pack read meanwhile) apart
    thread_before: float = field(default_factory=time.thread_time)
    finished: list[float] = field(default_factory=list)
    waits: dict[str, float] = field(default_factory=dict)  # what, to seconds summed over hosts
    marks: dict[str, float] = field(default_factory=dict)  # one-off stamps (e.g. seed started)

    @classmethod
    def from_env(cls, role: str) -> HostClock | None:
        path = timeline_file()
        return cls(path, role) if path else None

    def add(self, what: str, seconds: float) -> None:
        self.waits[what] = self.waits.get(what, 0.0) + seconds

    def mark(self, what: str, at: float | None = None) -> None:
        """A one-off stamp: now, or `at` (a time.monotonic() taken before this clock existed)."""
        self.marks[what] = round(time.monotonic() if at is None else at, 4)

    def host_done(self) -> None:
        self.finished.append(time.monotonic())

    def write(self, **extra: Any) -> None:
        record = {
            "role": self.role,
            "started": round(self.started, 4),
            "cpu_s_before": self.cpu_before,
            "finished": [round(t, 3) for t in self.finished],
            "waits_s": {what: round(s, 4) for what, s in self.waits.items()},
            "marks": self.marks,
            "ended": round(time.monotonic(), 4),
            "loop_cpu_s": round(time.thread_time() - self.thread_before, 4),
            **own_usage(),
            **extra,
        }
        append_stamps(self.path, record)
