"""The terminal view of a check: per rule its verdict; for failures the hosts, what they report, the fix.

Hosts that fail the same way (same observed value, same fix) share one entry, named compactly
(`gpu-[01-03,05]`), so a 500-host fleet prints one line per distinct problem, not per host.
"""

from __future__ import annotations

from collections.abc import Collection

from rich.console import Console
from rich.markup import escape

from fleet.checks import UNJUDGED, CheckReport, NotJudged, RuleResult, RuleVerdict, format_value
from fleet.hostsets import compact_hosts
from fleet.render.grouping import check_verdict, grouped_verdicts, tally
from fleet.render.terminal.baseline import print_measurement_failures

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
    reached = [h for h in report.hosts if h not in report.unreached]
    if reached:
        for result in report.results:
            render_rule(console, result, report.unreached)
    else:  # every rule would list the same hosts, skipped for the same reasons
        console.print(
            f"[yellow]no host was reached: none of {len(report.results)} rule(s) judged[/]"
        )
    console.print()
    for line in summary_lines(report):
        console.print(line)


def render_rule(
    console: Console, result: RuleResult, unreached: Collection[str] = frozenset()
) -> None:
    """The rule's verdict and tally, then why it failed or was not judged, per group of hosts.
    Hosts that were not reached are only counted here: the summary says why, once."""
    rule = result.rule
    status = result.status
    mark = WARN_MARK if status == "fail" and rule.severity == "warn" else MARK[status]
    console.print(
        f"{mark} [bold]{escape(rule.id)}[/] [dim]{rule.severity} · {tally(result.verdicts)}[/]"
    )
    if status in ("fail", "unknown") and rule.description:
        console.print(f"    [dim]{escape(rule.description)}[/]")
    # a baseline's failures: one line per measurement outside its band
    print_failure = print_measurement_failures if rule.kind == "baseline" else _print_failure
    for verdicts in grouped_verdicts(v for v in result.verdicts if v.status == "fail"):
        print_failure(console, verdicts)
    pending = (v for v in result.verdicts if v.status in UNJUDGED and v.host not in unreached)
    for verdicts in grouped_verdicts(pending):
        names = compact_hosts(v.host for v in verdicts)
        first = verdicts[0]
        console.print(f"    [yellow]{first.status}[/] on {escape(names)}: {escape(first.reason)}")


def _print_failure(console: Console, verdicts: list[RuleVerdict]) -> None:
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


def summary_lines(report: CheckReport) -> list[str]:
    """The verdict (failed, incomplete or passed: never green when an error rule was not judged
    or nothing passed), then each reason something was not judged, once."""
    lines = [_verdict_line(report)]
    causes = report.not_judged()
    if causes:
        lines.append("  not judged:")
        lines += [_cause_line(cause, len(report.results)) for cause in causes]
        if report.unjudged("error"):
            lines.append(
                "  [dim]--strict counts error rules not judged as failures (exit bit 32)[/]"
            )
    return lines


VERDICT_STYLE = {"failed": "[bold red]✗", "incomplete": "[bold yellow]?", "passed": "[bold green]✓"}


def _verdict_line(report: CheckReport) -> str:
    outcome, headline, detail = check_verdict(report)
    return f"{VERDICT_STYLE[outcome]} {headline}[/]: {escape(detail)}"


def _cause_line(cause: NotJudged, rule_count: int) -> str:
    rules = f"{len(cause.rules)} rules"
    if len(cause.rules) == 1:
        rules = cause.rules[0]
    elif len(cause.rules) == rule_count:
        rules = f"all {rule_count} rules"
    return (
        f"    [yellow]{cause.status}[/] {escape(rules)} on {escape(compact_hosts(cause.hosts))}: "
        f"{escape(cause.reason)}"
    )
