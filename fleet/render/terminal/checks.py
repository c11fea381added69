"""The terminal view of a check: per rule its verdict; for failures the hosts, what they report, the fix.

Hosts that fail the same way (same observed value, same fix) share one entry, named compactly
(`gpu-[01-03,05]`), so a 500-host fleet prints one line per distinct problem, not per host.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.markup import escape

from fleet.checks import (
    LONG_LIST,
    CheckReport,
    NotJudged,
    Rule,
    RuleResult,
    RuleVerdict,
    format_value,
    observed_text,
)
from fleet.hostsets import compact_hosts
from fleet.render.grouping import check_verdict, grouped_verdicts, tally
from fleet.render.terminal.baseline import print_measurement_failures
from fleet.render.terminal.wrap import say

MARK = {
    "fail": "[bold red]✗ fail[/]",
    "unknown": "[yellow]? unknown[/]",
    "skipped": "[yellow]- skipped[/]",
    "pass": "[green]✓ pass[/]",
    "n/a": "[dim]· n/a[/]",
}
WARN_MARK = "[bold yellow]! warn[/]"  # a failed warn-severity rule: reported, exit code unchanged


def render_report(
    console: Console, report: CheckReport, title: str = "", every: bool = False
) -> None:
    """Every rule's verdict and why; `every` (--details): a long observed list (a matrix's
    pairs) item by item too, under its summary."""
    if title:
        say(console, f"[bold]{escape(title)}[/]", 2)
    reached = [h for h in report.hosts if h not in report.unreached]
    if reached:
        for result in report.results:
            render_rule(console, result, every)
    else:  # every rule would list the same hosts, skipped for the same reasons
        console.print(
            f"[yellow]no host was reached: none of {len(report.results)} rule(s) judged[/]"
        )
    console.print()
    for line in summary_lines(report):
        say(console, line, 6 if line.startswith("    ") else 2)


def render_rule(console: Console, result: RuleResult, every: bool = False) -> None:
    """The rule's verdict and tally, then why it failed, per group of hosts. Why a rule was not
    judged is only counted here: the summary's `not judged:` says each reason once."""
    rule = result.rule
    status = result.status
    mark = WARN_MARK if status == "fail" and rule.severity == "warning" else MARK[status]
    console.print(
        f"{mark} [bold]{escape(rule.id)}[/] [dim]{rule.severity} · {tally(result.answers)}[/]"
    )
    if status in ("fail", "unknown") and rule.description:
        say(console, f"    [dim]{escape(rule.description)}[/]", 4)
    for verdicts in grouped_verdicts(result.failures):
        if rule.kind == "baseline":  # one line per measurement outside its band
            print_measurement_failures(console, verdicts)
        else:
            _print_failure(console, result.rule, verdicts, every)


def _print_failure(
    console: Console, rule: Rule, verdicts: list[RuleVerdict], every: bool = False
) -> None:
    first = verdicts[0]
    names = compact_hosts(v.host for v in verdicts)
    shown = observed_text(rule, first)
    seen = "failed" if shown is None else f"observed {escape(shown)}"
    if first.expected is not None or (first.reason and rule.kind != "check"):
        expected = escape(format_value(first.expected)) if first.expected is not None else "?"
        seen += f", expected {expected}"
    if first.cohort is not None:
        seen += f" [dim](among {escape(format_value(first.cohort))})[/]"
    say(console, f"    [red]{escape(names)}[/]: {seen}", 6)
    listed = first.observed
    if every and isinstance(listed, list) and len(listed) > LONG_LIST:
        say(console, f"      [dim]every one: {escape('; '.join(map(str, listed)))}[/]", 6)
    if first.reason:
        say(console, f"      [dim]{escape(first.reason)}[/]", 6)
    if first.fix:
        say(console, f"      [bold]fix:[/] {escape(first.fix)}", 11)


def summary_lines(report: CheckReport) -> list[str]:
    """The verdict (failed, incomplete or passed: never green when an error rule was not judged
    or nothing passed), then each reason something was not judged, once."""
    lines = [_verdict_line(report)]
    causes = report.not_judged()
    if causes:
        lines.append("  not judged:")
        described = {r.rule.id: r.rule.description for r in report.results}
        lines += [_cause_line(cause, len(report.results), described) for cause in causes]
        if report.unjudged_count("error") and not report.strict:
            lines.append(
                "  [dim]--strict counts error rules not judged as failures (exit bit 32)[/]"
            )
    return lines


VERDICT_STYLE = {"failed": "[bold red]✗", "incomplete": "[bold yellow]?", "passed": "[bold green]✓"}


def _verdict_line(report: CheckReport) -> str:
    outcome, headline, detail = check_verdict(report)
    return f"{VERDICT_STYLE[outcome]} {headline}[/]: {escape(detail)}"


def _cause_line(cause: NotJudged, rule_count: int, described: Mapping[str, str]) -> str:
    """One reason some rules were not judged; a rule alone with its reason says what it checks."""
    rules = f"{len(cause.rules)} rules"
    if len(cause.rules) == 1:
        rule = cause.rules[0]
        rules = f"{rule} ({described[rule]})" if described.get(rule) else rule
    elif len(cause.rules) == rule_count:
        rules = f"all {rule_count} rules"
    return (
        f"    [yellow]{cause.status}[/] {escape(rules)} on {escape(compact_hosts(cause.hosts))}: "
        f"{escape(cause.reason)}"
    )


def tally_line(report: CheckReport) -> str:
    """Every (rule, host) verdict counted on one line, under the findings."""
    counts = report.counts()
    warnings = len(report.failures("warning"))
    order = ("fail", "pass", "unknown", "skipped", "n/a")
    said = " · ".join(f"{counts[s]} {s}" for s in order if counts.get(s))
    return f"[dim]verdicts (rule × host): {said or 'none'}; {warnings} warning(s)[/]"
