"""Findings on the terminal: what is wrong, where, and what to do, most severe first — the first
thing `fleet probe`, `fleet check`, `fleet show` and `fleet diff` say (issue 38).

Each finding is two lines at most: the mark, the hosts (folded: `h[01-04]`) and what is wrong;
then the action word and the fix's first sentence. Past MAX_SHOWN findings the rest are counted,
never dropped without a word; the JSON document holds them all.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from fleet.findings.model import Finding, NotJudgedLine
from fleet.hostsets import compact_hosts
from fleet.render.sentences import cut_words, fix_line
from fleet.render.terminal.wrap import line_count, say

MARK = {"error": "[bold red]✗[/]", "warning": "[bold yellow]![/]", "info": "[dim]·[/]"}
MAX_SHOWN = 12


def render_findings(
    console: Console,
    findings: Sequence[Finding],
    not_judged: Sequence[NotJudgedLine] = (),
    limit: int = MAX_SHOWN,
    rule_count: int = 0,
    exit_code: int = 0,
) -> None:
    """The findings block: a heading that counts them, each finding, then what was not judged.
    `exit_code`: the command's, so that no heading is green above trouble."""
    console.print(Text.from_markup(heading(findings, bool(not_judged), exit_code), emoji=False))
    for finding in findings[:limit]:
        print_finding(console, finding)
    if len(findings) > limit:
        rest = Counter(f.severity for f in findings[limit:])
        said = ", ".join(f"{n} {severity}" for severity, n in rest.items())
        console.print(f"  … {len(findings) - limit} more ({said}): --json - lists them all")
    for line in not_judged:
        say(console, f"  [yellow]not judged[/]: {escape(_not_judged_text(line, rule_count))}", 4)


def heading(findings: Sequence[Finding], some_not_judged: bool = False, exit_code: int = 0) -> str:
    if not findings and exit_code:  # every host that did not finish is a finding: never here
        return f"[bold]no findings[/] in what fleet could judge, yet exit {exit_code}"
    if not findings and some_not_judged:
        return "[bold]no findings[/] in what was judged"
    if not findings:
        return "[bold green]✓ no findings[/]: nothing wrong that fleet can see"
    counts = Counter(f.severity for f in findings)
    parts = [f"{counts[s]} {s}{'s' if counts[s] > 1 else ''}" for s in ("error", "warning", "info")]
    return f"[bold]findings[/] ({', '.join(p for p in parts if not p.startswith('0 '))}):"


def print_finding(console: Console, finding: Finding) -> None:
    """Two lines at most for what is wrong, two for what to do (a finding is 4 lines at most):
    the what cut at a word, the fix shortened keeping its command (fix_line)."""
    hosts = compact_hosts(finding.hosts) if finding.hosts else "fleet"
    where = f" {finding.where}" if finding.where else ""
    related = len(finding.evidence.get("related") or ())
    more = f" [dim](+{related} related)[/]" if related else ""
    lead = f"{MARK[finding.severity]} [bold]{escape(hosts)}[/]{escape(where)}: "
    what = _fitted(console, lead, finding.what, more, cut_words)
    if what != finding.what and _fitted(console, lead, finding.what, "", cut_words) == finding.what:
        what, more = finding.what, ""  # the whole what rather than how many it took in
    say(console, f"{lead}{escape(what)}{more}", 4)
    if finding.action != "none":
        arrow = f"    [cyan]→ {finding.action}[/]: "
    elif finding.severity != "info":  # nothing to do, but what it costs (a hardware limit)
        arrow = "    [cyan]→[/] "
    else:
        return
    fix = _fitted(console, arrow, finding.fix, "", fix_line)
    say(console, f"{arrow}{escape(fix)}" if fix else arrow.rstrip(": "), 6)


MAX_LINES = 2  # of a finding's what, and of its fix


def _fitted(
    console: Console, lead: str, text: str, tail: str, shorten: Callable[[str, int], str]
) -> str:
    """`text` shortened by `shorten` until `lead`, it and `tail` wrap to MAX_LINES lines at the
    console's width (the JSON keeps it whole). Lines are counted on the plain text
    (wrap.line_count: what hanging_lines, which `say` prints with, would make of it)."""
    most = len(text)
    width = console.width  # asked once: rich works it out from the terminal each time
    while True:
        shown = shorten(text, most)
        plain = _plain(lead, shown, tail)
        start = len(plain) - len(plain.lstrip(" "))
        head, body = plain[:start], plain[start:]
        if most <= 16 or line_count(head, body, 6, width, MAX_LINES) <= MAX_LINES:
            return shown
        most = min(most, len(shown)) - 6


def _plain(lead: str, shown: str, tail: str) -> str:
    """The text `lead` (markup), `shown` (plain) and `tail` (markup) print: each part's alone
    where white space parts them (no markup spans it), the lead's kept; a lead
    that names 20,000 hosts is not parsed again for each cut of the text tried after it."""
    if lead[-1:].isspace() and (not tail or tail[0].isspace()):
        return _markup_plain(lead) + _shown_plain(shown) + _markup_plain(tail)
    return Text.from_markup(f"{lead}{escape(shown)}{tail}", emoji=False).plain


# What rich changes in escaped text: a backslash, control codes it strips (fleet's consoles read
# no `:name:` emoji codes: fleet/render/terminal/console.py)
CHANGED = re.compile(r"[\\\x07\x08\x0b\x0c\r]")


def _shown_plain(shown: str) -> str:
    """The escaped text `shown` as rich prints it: itself where nothing in it is changed (a
    long cut of a fix is tried thousands of times), else as rich's markup reads it."""
    if CHANGED.search(shown) is None:
        return shown
    return Text.from_markup(escape(shown), emoji=False).plain


@lru_cache(maxsize=16)
def _markup_plain(markup: str) -> str:
    return Text.from_markup(markup, emoji=False).plain


def _not_judged_text(line: NotJudgedLine, rule_count: int) -> str:
    rules = line.rules[0] if len(line.rules) == 1 else f"{len(line.rules)} rules"
    if len(line.rules) == rule_count > 1:
        rules = f"all {rule_count} rules"
    return f"{rules} on {compact_hosts(line.hosts)} ({line.cause})"
