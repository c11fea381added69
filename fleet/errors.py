"""The errors fleet raises, each with a message, the context it happened in, and a hint to fix it.

    FleetError                     anything fleet reports to a user
    ├── UsageError                 a bad command line (exit code 2, nothing contacted)
    ├── InventoryError             a bad inventory file: names file:line and the value (exit code 2)
    ├── StoreError                 a saved run that cannot be read or written
    ├── ReportError                a report (the HTML page) that cannot be written
    └── HostError                  one host failed; carries the host status it ends with
        ├── UnreachableError       status "unreachable": refused, timed out connecting, no route, DNS
        ├── AuthError              status "auth_failed"
        ├── HostKeyUnknownError    status "hostkey_unknown": not in known_hosts (fingerprint given)
        ├── HostKeyChangedError    status "hostkey_changed": differs from known_hosts
        ├── NoPythonError          status "no_python": the interpreter is missing or too old
        └── UnavailableError       status "unavailable": the scheduler says the node is not usable

HostErrors never escape an orchestrator (the fan-out, fabric rounds): each becomes its host's outcome.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from fleet.models import HostStatus


class FleetError(Exception):
    """Base class: `message` says what happened, `context` where, `hint` what to try.

    `exit_code` is what the CLI exits with when this error stops a command (2: bad input, nothing
    was contacted)."""

    exit_code = 2

    def __init__(self, message: str, *, context: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.context = context
        self.hint = hint

    def render(self, width: int | None = None) -> str:
        """pip-style text: error, ╰─> context, hint. `width` (the terminal's): each line wrapped
        between words, continuation lines indented under its text; a word longer than the line
        (a path, a command's argument) stays whole on a line of its own."""
        lines = [("error: ", self.message)]
        if self.context:
            lines.append(("╰─> ", self.context))
        if self.hint:
            lines.append(("hint: ", self.hint))
        return "\n".join(_wrapped(lead, text, width) for lead, text in lines)


def _wrapped(lead: str, text: str, width: int | None) -> str:
    return lead + text if width is None else wrap_words(text, width, lead, len(lead))


def wrap_words(text: str, width: int, lead: str = "", indent: int = 4) -> str:
    """Each line of `text` wrapped between words at `width`, the first after `lead`, the rest
    indented by `indent` (a line indented already keeps its own); a word longer than the line
    (a path) stays whole on its own line."""
    return "\n".join(
        textwrap.fill(
            line,
            width,
            initial_indent=lead if number == 0 else "" if line[:1].isspace() else " " * indent,
            subsequent_indent=" " * indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        or lead.rstrip()
        for number, line in enumerate(text.splitlines() or [""])
    )


class UsageError(FleetError):
    """The command line asks for something that cannot be done."""


class InventoryError(FleetError):
    """The inventory is not valid; the message starts with FILE:LINE."""


class StoreError(FleetError):
    """A run could not be saved or loaded."""


class ReportError(FleetError):
    """A report could not be written (a missing or read-only folder, a full disk)."""


class HostError(FleetError):
    """One host failed before it could report; `status` is the outcome it ends with."""

    status: ClassVar[HostStatus] = "unreachable"


class UnreachableError(HostError):
    status = "unreachable"


class AuthError(HostError):
    status = "auth_failed"


class HostKeyUnknownError(HostError):
    status = "hostkey_unknown"


class HostKeyChangedError(HostError):
    status = "hostkey_changed"


class NoPythonError(HostError):
    status = "no_python"


class UnavailableError(HostError):
    """Slurm reports the node down, drained, draining or failed: it is never launched on."""

    status = "unavailable"
