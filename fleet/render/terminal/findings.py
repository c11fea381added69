"""Findings on the terminal: what is wrong, where, and what to do, most severe first — the first
thing `fleet probe`, `fleet check`, `fleet show` and `fleet diff` say (issue 38).

Each finding is two lines at most: the mark, the hosts (folded: `h[01-04]`) and what is wrong;
then the action word and the fix's first sentence. Past MAX_SHOWN findings the rest are counted,
never dropped without a word; the JSON document holds them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from fleet.findings.model import Finding, NotJudgedLine
from fleet.hostsets import compact_hosts
from fleet.render.grouping import first_sentence
from fleet.render.terminal.wrap import say

MARK = {"error": "[bold red]✗[/]", "warning": "[bold yellow]![/]", "info": "[dim]·[/]"}
MAX_SHOWN = 12
MAX_FIX_CHARS = 110


def render_findings(
    console: Console,
    findings: Sequence[Finding],
    not_judged: Sequence[NotJudgedLine] = (),
    limit: int = MAX_SHOWN,
    rule_count: int = 0,
) -> None:
    """The findings block: a heading that counts them, each finding, then what was not judged."""
    console.print(Text.from_markup(heading(findings, bool(not_judged))))
    for finding in findings[:limit]:
        print_finding(console, finding)
    if len(findings) > limit:
        rest = Counter(f.severity for f in findings[limit:])
        said = ", ".join(f"{n} {severity}" for severity, n in rest.items())
        console.print(f"  … {len(findings) - limit} more ({said}): --json - lists them all")
    for line in not_judged:
        say(console, f"  [yellow]not judged[/]: {escape(_not_judged_text(line, rule_count))}", 4)


def heading(findings: Sequence[Finding], some_not_judged: bool = False) -> str:
    if not findings and some_not_judged:
        return "[bold]no findings[/] in what was judged"
    if not findings:
        return "[bold green]✓ no findings[/]: nothing wrong that fleet can see"
    counts = Counter(f.severity for f in findings)
    parts = [f"{counts[s]} {s}{'s' if counts[s] > 1 else ''}" for s in ("error", "warning", "info")]
    return f"[bold]findings[/] ({', '.join(p for p in parts if not p.startswith('0 '))}):"


def print_finding(console: Console, finding: Finding) -> None:
    hosts = compact_hosts(finding.hosts) if finding.hosts else "fleet"
    where = f" {finding.where}" if finding.where else ""
    related = len(finding.evidence.get("related") or ())
    more = f" [dim](+{related} related)[/]" if related else ""
    say(
        console,
        f"{MARK[finding.severity]} [bold]{escape(hosts)}[/]{escape(where)}: "
        f"{escape(finding.what)}{more}",
        4,
    )
    if finding.action != "none":  # nothing to do: the line above is all there is to say
        fix = first_sentence(finding.fix, max(MAX_FIX_CHARS, 2 * (console.width - 8)))
        say(console, f"    [cyan]→ {finding.action}[/]{': ' + escape(fix) if fix else ''}", 6)


def _not_judged_text(line: NotJudgedLine, rule_count: int) -> str:
    rules = line.rules[0] if len(line.rules) == 1 else f"{len(line.rules)} rules"
    if len(line.rules) == rule_count > 1:
        rules = f"all {rule_count} rules"
    return f"{rules} on {compact_hosts(line.hosts)} ({line.cause})"
