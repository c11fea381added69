"""An assessment on the terminal, the answer first (issue 38): how the hosts ended, then the
findings (what is wrong, where, what to do), then the detail. `fleet probe` and `fleet show` add
the run's key facts and divergence, the drift against --baseline RUN and a baseline file's
verdicts; `fleet check` the verdict, the findings, a tally and what was not judged — every rule
and host with --details."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from fleet.models import HOST_STATUSES
from fleet.registry import declaring
from fleet.render.grouping import check_headline
from fleet.render.terminal.findings import render_findings
from fleet.render.terminal.run import render_detail, render_hosts
from fleet.render.terminal.wrap import say

if TYPE_CHECKING:
    from fleet.findings.assessment import Assessment


def render_probed(
    console: Console, assessment: Assessment, saved: str | None, between: bool = False
) -> None:
    """`fleet probe` (and `fleet show`): hosts, findings, the run's detail, then the drift
    against --baseline RUN and a --baseline-file's verdicts."""
    render_hosts(console, assessment.run, errors=_errors_in_table(assessment))
    # rules not judged: only fleet check says
    render_findings(console, assessment.findings, exit_code=assessment.exit_code)
    render_detail(
        console,
        assessment.run,
        assessment.diff,
        saved,
        between=between,
        brief=not between,
        run_ref=assessment.where if saved is None else saved,
    )
    if assessment.drift is not None:
        from fleet.render.terminal.diff import drift_view  # only with --baseline: start-up

        console.print(drift_view(assessment.drift))
    if assessment.baseline_verdicts is not None:
        from fleet.render.terminal.checks import render_report  # the rules engine: on demand

        console.print()
        named = [s for s in assessment.sources if s.startswith("baseline ")]
        title = f"{' · '.join(named)} · {len(assessment.run.hosts)} host(s)"
        render_report(console, assessment.baseline_verdicts, title)


def render_checked(console: Console, assessment: Assessment, details: bool = False) -> None:
    """`fleet check`: the verdict and what was judged, the findings, the tally of verdicts; with
    `details`, every rule's verdict and why (the view before findings led)."""
    from fleet.render.terminal.checks import render_report, tally_line

    report = assessment.checks
    if report is None:
        return
    run = assessment.run
    outcome, headline = check_headline(report)
    say(console, f"{VERDICT_MARK[outcome]} {escape(headline)}[/]", 2)
    render_findings(
        console,
        assessment.findings,
        assessment.not_judged,
        rule_count=len(report.results),
        exit_code=assessment.exit_code,
    )
    judged = f"{', '.join(assessment.sources)} · {len(run.hosts)} host(s) · run {assessment.where}"
    say(console, tally_line(report), 2)
    say(console, f"[dim]judged: {escape(judged)}[/]", 4)
    # the probes' own lines under the verdict (fleet/units/PROBE/terminal.py: allreduce's line rates)
    for _, view in declaring("terminal", "checked_view", among=run.probes):
        shown = view(assessment)
        if shown is not None:
            console.print(shown)
    if details:
        console.print()
        render_report(console, report, f"fleet check · {judged}", every=True)
    else:
        console.print("[dim]every rule and host: --details (or --json -)[/]")


def _errors_in_table(assessment: Assessment) -> bool:
    """Whether the hosts table says each host's error and hint: not where the findings say them
    for every host that did not finish (once is enough), unless a host key is in question (each
    host's fingerprint is in the table; the folded finding blanks them)."""
    said: set[str] = set()
    for finding in assessment.findings:
        if finding.kind.startswith("hostkey_"):
            return True
        if finding.kind in HOST_KINDS:
            said.update(finding.hosts)
    return any(
        (o.status != "ok" or o.error or o.hint) and o.name not in said
        for o in assessment.run.hosts.values()
    )


# the findings of hosts that did not finish: their error and hint, said there, not in the table
HOST_KINDS = frozenset({*HOST_STATUSES, "probe-failed"})
VERDICT_MARK = {"failed": "[bold red]✗", "incomplete": "[bold yellow]?", "passed": "[bold green]✓"}
