"""What the terminal and the HTML report both group and shorten the same way, so the two surfaces
say the same thing: hosts that ended alike, verdicts that read alike, the verdict tally, a value
shortened for a table cell. No rich here: the HTML side must not need it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fleet.models import HostOutcome

if TYPE_CHECKING:  # the rules engine (jmespath) loads with the first verdict, not with fleet.cli
    from fleet.checks import Verdict

MAX_VALUE_CHARS = 60


def short(value: Any) -> str:
    if isinstance(value, tuple) and len(value) > 4:
        return f"[{len(value)} items]"
    text = "(unset)" if value is None else str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def ended_alike(outcomes: list[HostOutcome]) -> list[list[HostOutcome]]:
    """Hosts grouped by how they ended (status, error and hint, their own names blanked out),
    at any fleet size: one cause is one row, whether 2 hosts share it or 1,000. Trouble first,
    then the biggest groups."""
    groups: dict[tuple[str, str], list[HostOutcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.ending(), []).append(outcome)
    return sorted(groups.values(), key=lambda g: (g[0].status == "ok", -len(g)))


def grouped_verdicts(verdicts: Iterable[Verdict]) -> list[list[Verdict]]:
    """Verdicts that read the same (status, observed, expected, fix, reason), in first-seen order."""
    from fleet.checks import format_value

    groups: dict[tuple[Any, ...], list[Verdict]] = {}
    for verdict in verdicts:
        key = (
            verdict.status,
            format_value(verdict.observed),
            format_value(verdict.expected),
            verdict.fix,
            verdict.reason,
        )
        groups.setdefault(key, []).append(verdict)
    return list(groups.values())


def tally(verdicts: Iterable[Verdict]) -> str:
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    order = ("fail", "unknown", "skipped", "pass", "n/a")
    return " · ".join(f"{status} {counts[status]}" for status in order if status in counts)
