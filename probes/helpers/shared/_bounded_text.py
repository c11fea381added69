"""Bounded text: an error message cut to a size a run document can hold, keeping its cause.

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module
name (`from _bounded_text import bound_text`); the host runner serves it from memory. Stdlib
only, Python 3.8+.
"""

from __future__ import annotations

MAX_ERROR_CHARS = 500


def bound_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Cut `text` to `limit` chars; a multi-line text keeps its last line, which names the cause."""
    if len(text) <= limit:
        return text
    lines = text.rstrip().splitlines()
    if len(lines) < 2:
        return text[: limit - 1] + "…"
    tail = lines[-1][-(limit // 2) :]
    return text[: limit - len(tail) - 3] + " … " + tail


def describe_error(exc: BaseException, limit: int = MAX_ERROR_CHARS) -> str:
    """`TypeName: message`, at most `limit` chars; a long message keeps its start and last line."""
    return bound_text("%s: %s" % (type(exc).__name__, exc), limit)
