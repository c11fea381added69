"""An assessment on the terminal, in the order each command says it: `fleet probe` and `fleet
show` the run (hosts, key facts, divergence), then the drift and a baseline file's verdicts;
`fleet check` the verdicts and line rates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from fleet.render.terminal.run import render_run

if TYPE_CHECKING:
    from fleet.findings.assessment import Assessment


def render_probed(
    console: Console, assessment: Assessment, saved: str | None, between: bool = False
) -> None:
    """`fleet probe` (and `fleet show`): the run, then the drift against --baseline RUN, then
    a --baseline-file's verdicts."""
    render_run(console, assessment.run, assessment.diff, saved, between=between)
    if assessment.drift is not None:
        from fleet.render.terminal.diff import drift_view  # only with --baseline: start-up

        console.print(drift_view(assessment.drift))
    if assessment.checks is not None and assessment.baseline is not None:
        from fleet.render.terminal.checks import render_report  # the rules engine: on demand

        console.print()
        title = f"{' · '.join(assessment.sources)} · {len(assessment.run.hosts)} host(s)"
        render_report(console, assessment.checks, title)


def render_checked(console: Console, assessment: Assessment) -> None:
    """`fleet check`: the verdicts under a title naming the rules and the run, the line rates."""
    from fleet.render.terminal.baseline import render_line_rates
    from fleet.render.terminal.checks import render_report

    if assessment.checks is None:
        return
    run = assessment.run
    title = (
        f"fleet check · {', '.join(assessment.sources)} · {len(run.hosts)} host(s)"
        f" · run {assessment.where}"
    )
    render_report(console, assessment.checks, title)
    render_line_rates(console, list(assessment.line_rates))
