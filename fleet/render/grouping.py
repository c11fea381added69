"""What the terminal and the HTML report both group and shorten the same way, so the two surfaces
say the same thing: hosts that ended alike, verdicts that read alike, the verdict tally, a value
shortened for a table cell. No rich here: the HTML side must not need it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleet.checks import CheckReport, Verdict, format_value
from fleet.hostsets import compact_hosts
from fleet.models import HostOutcome

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


def check_verdict(report: CheckReport) -> tuple[str, str, str]:
    """The check's verdict as (outcome, headline, detail), worded once for every surface: the
    terminal, the HTML page and the JUnit summary must never disagree (an incomplete check is
    never shown green anywhere)."""
    warnings = len(report.failures("warn"))
    counts = report.counts()
    rest = (
        f"{warnings} warning(s); {counts['pass']} pass, {counts['unknown']} unknown, "
        f"{counts['skipped']} skipped (rule × host)"
    )
    errors = report.failures("error")
    if errors:
        hosts_by_rule: dict[str, list[str]] = {}
        for rule, verdict in errors:
            hosts_by_rule.setdefault(rule.id, []).append(verdict.host)
        where = "; ".join(f"{r} on {compact_hosts(h)}" for r, h in hosts_by_rule.items())
        return "failed", "check failed", f"{len(errors)} error failure(s) — {where}; {rest}"
    if report.outcome == "incomplete":
        unjudged = len(report.unjudged("error"))
        what = f"{unjudged} error-rule verdict(s) not judged" if unjudged else "nothing passed"
        return "incomplete", "check incomplete", f"no error failures, but {what}; {rest}"
    return "passed", "check passed", f"every error rule judged, none failed; {rest}"
