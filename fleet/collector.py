"""The garbage collector paused while fleet builds big structures that hold no garbage.

Python's collector runs a full pass over every young object each time enough new ones pile up:
reading a 20,000-host run, or judging its 800,000 (rule, host) verdicts, makes millions of new
objects and no garbage, and the passes over them cost as much as the work itself (5 of 14 s of
a 20,000-host `fleet check`). Whatever garbage is made meanwhile is collected once it is over.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No collection inside; the collector as it was after (nested pauses are fine). What the CLI
    froze meanwhile (`gc.freeze()`: the run it read) stays frozen: unfrozen, the millions of
    objects of a 20,000-host run would make the interpreter's last full collection at exit cost
    seconds; frozen objects are still freed when nothing refers to them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
