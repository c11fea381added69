"""A deadline for the current task that starts when told, not when created.

A host waits for a handshake slot before its clock may start; `asyncio.timeout` (3.11+) starts at
once and `asyncio.wait_for` wraps one await, so this is a small timer of our own (Python 3.9+):
`start()` arms it, expiry cancels the task, and `expired` tells that cancellation from others
(Ctrl-C cancels the same task).
"""

from __future__ import annotations

import asyncio
import time


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started_at: float | None = None
        self.expired = False
        self._task = asyncio.current_task()
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Arm the deadline (once; later calls keep the first start)."""
        if self.started_at is not None or self._task is None:
            return
        self.started_at = time.monotonic()
        self._timer = asyncio.get_running_loop().call_later(self.seconds, self._expire)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def absorb(self) -> None:
        """The task handled this deadline's cancellation: undo its count (3.11+), so later
        timeouts in the same task (asyncio.wait_for) still tell theirs apart."""
        uncancel = getattr(self._task, "uncancel", None)
        if uncancel is not None:
            uncancel()

    def _expire(self) -> None:
        self.expired = True
        assert self._task is not None
        self._task.cancel()
