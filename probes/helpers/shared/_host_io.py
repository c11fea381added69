"""Commands started at once and read back under a deadline, and files read or None: how the
health probe and its helpers touch the host.

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Optional, Sequence, Tuple

Outcome = Tuple[Optional[int], str, str]  # (exit code, None when it did not finish; stdout; stderr)


def start(argv: Sequence[str]) -> Optional["subprocess.Popen[bytes]"]:
    """The command started in the C locale (its messages are matched in English), or None."""
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ, LC_ALL="C"),
        )
    except OSError:
        return None


def finish(proc: Optional["subprocess.Popen[bytes]"], deadline: float) -> Outcome:
    """(exit code or None when it did not finish, stdout, stderr) of a started command."""
    if proc is None:
        return None, "", "could not start"
    try:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return None, out.decode("utf-8", "replace"), "timed out"
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def read(path: str, binary: bool = False, limit: int = -1) -> Any:
    """The file's text (or bytes), None where it cannot be read."""
    try:
        with open(path, "rb" if binary else "r") as handle:
            return handle.read(limit)
    except (OSError, UnicodeDecodeError):
        return None


def why(rc: Optional[int], out: str, err: str) -> str:
    """A failed command in one line: its last line of output and its exit code."""
    message = (err.strip() or out.strip()).splitlines()
    text = message[-1] if message else ""
    return ("%s (exit code %s)" % (text, rc)).strip() if rc is not None else (text or "timed out")
