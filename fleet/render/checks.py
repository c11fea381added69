"""The terminal view of a check: per rule its verdict; for failures the hosts, what they report, the fix.

Hosts that fail the same way (same observed value, same fix) share one entry, named compactly
(`gpu-[01-03,05]`), so a 500-host fleet prints one line per distinct problem, not per host.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markup import escape

from fleet.checks import CheckReport, RuleResult, Verdict, format_value
from fleet.inventory import compact_hosts

MARK = {
    "fail": "[bold red]✗ fail[/]",
    "unknown": "[yellow]? unknown[/]",
    "skipped": "[yellow]- skipped[/]",
    "pass": "[green]✓ pass[/]",
    "n/a": "[dim]· n/a[/]",
}
WARN_MARK = "[bold yellow]! warn[/]"  # a failed warn-severity rule: reported, exit code unchanged


def render_report(console: Console, report: CheckReport, title: str = "") -> None:
    if title:
        console.print(f"[bold]{escape(title)}[/]")
    for result in report.results:
        render_rule(console, result)
    console.print()
    console.print(summary_line(report))


def render_rule(console: Console, result: RuleResult) -> None:
    rule = result.rule
    status = result.status
    mark = WARN_MARK if status == "fail" and rule.severity == "warn" else MARK[status]
    console.print(
        f"{mark} [bold]{escape(rule.id)}[/] [dim]{rule.severity} · {tally(result.verdicts)}[/]"
    )
    if status in ("fail", "unknown", "skipped") and rule.description:
        console.print(f"    [dim]{escape(rule.description)}[/]")
    for verdicts in grouped_verdicts(v for v in result.verdicts if v.status == "fail"):
        _print_failure(console, verdicts)
    for verdicts in grouped_verdicts(
        v for v in result.verdicts if v.status in ("unknown", "skipped")
    ):
        names = compact_hosts(v.host for v in verdicts)
        first = verdicts[0]
        console.print(f"    [yellow]{first.status}[/] on {escape(names)}: {escape(first.reason)}")


def _print_failure(console: Console, verdicts: list[Verdict]) -> None:
    first = verdicts[0]
    names = compact_hosts(v.host for v in verdicts)
    seen = f"observed {escape(format_value(first.observed))}"
    if first.expected is not None or first.reason:
        expected = escape(format_value(first.expected)) if first.expected is not None else "?"
        seen += f", expected {expected}"
    if first.cohort is not None:
        seen += f" [dim](among {escape(format_value(first.cohort))})[/]"
    console.print(f"    [red]{escape(names)}[/]: {seen}")
    if first.reason:
        console.print(f"      [dim]{escape(first.reason)}[/]")
    if first.fix:
        console.print(f"      [bold]fix:[/] {escape(first.fix)}")


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


def summary_line(report: CheckReport) -> str:
    errors, warnings = report.failures("error"), report.failures("warn")
    counts = report.counts()
    rest = f"{counts['unknown']} unknown, {counts['skipped']} skipped (rule × host)"
    if errors:
        hosts_by_rule: dict[str, list[str]] = {}
        for rule, verdict in errors:
            hosts_by_rule.setdefault(rule.id, []).append(verdict.host)
        where = "; ".join(f"{r} on {compact_hosts(h)}" for r, h in hosts_by_rule.items())
        return (
            f"[bold red]✗ check failed[/]: {len(errors)} error failure(s) — {escape(where)}; "
            f"{len(warnings)} warning(s); {rest}"
        )
    return f"[bold green]✓ check passed[/]: no error failures; {len(warnings)} warning(s); {rest}"
