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
    seconds; frozen objects are still freed when nothing refers to them. In the executable, what
    the pause made is frozen too before the collector is back: a command's pause ends with its
    work (drift's baseline run, the judging's verdicts: millions of objects, no garbage), and the
    first collection after it walked them all (0.16 s of a 20,000-host drift)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if in_executable():
                gc.freeze()
            gc.enable()


# The executable's start (fleet/__main__.py): a command loads a few hundred modules, which make
# hundreds of thousands of objects and no garbage; the collector's passes over them were about a
# tenth of a command's start-up CPU. Paused until the command's module is loaded, then on again
# with what was loaded frozen (it lives as long as the command).
_START_UP = {"paused": False, "executable": False}


def pause_start_up() -> None:
    if gc.isenabled():
        gc.disable()
        _START_UP["paused"] = True
        _START_UP["executable"] = True


def end_start_up() -> None:
    """The start-up pause over; nothing to do when there was none (fleet called in-process)."""
    if _START_UP["paused"]:
        _START_UP["paused"] = False
        gc.freeze()
        gc.enable()


def in_executable() -> bool:
    """Whether this process is the fleet executable (fleet/__main__.py: one command, then the
    process ends), not fleet called in-process (tests, the API), whose callers may change what
    they read."""
    return _START_UP["executable"]


@contextlib.contextmanager
def loading_more() -> Iterator[None]:
    """Modules the executable loads after its command's (the SSH transport: asyncssh and
    cryptography, a few hundred modules, with the first SSH host): the collector paused over them
    too, and what they made frozen after, as at the start-up (about 40 young-generation passes,
    a sixth of that import's CPU). Nothing changes for fleet called in-process."""
    if not in_executable() or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
