"""`fleet probe`: probe the selected hosts, keep the run, show where the hosts differ (and the
drift against --baseline RUN; each host's measurements against --baseline-file FILE's bands)."""

from __future__ import annotations

import sys

import click

from fleet import api
from fleet.cli.exits import EXIT_DRIFT, with_bits
from fleet.cli.options import (
    baseline_file_option,
    baseline_option,
    cohort_by_option,
    tolerance_option,
)
from fleet.cli.probing import (
    ProbeRequest,
    emit_html,
    execute_probe,
    probe_options,
    probed_exit_code,
)


@click.command()
@probe_options
@tolerance_option()
@cohort_by_option
@baseline_option("Also report drift against this saved run (latest, previous, a path or id).")
@baseline_file_option(
    "--baseline-file",
    help="Also judge each host's measurements against the bands of its cohort in this baseline "
    "file (`fleet baseline` makes one); outside a band sets exit bit 16. With --baseline RUN, "
    "drift in measurements is judged against its bands instead of --tolerance.",
)
def probe(
    request: ProbeRequest,
    tolerance: float,
    cohort_by: str | None,
    baseline: str | None,
    baseline_file: str | None,
) -> None:
    """Run the probes on every selected host and show where the hosts differ."""
    scope = request.inventory_path or api.BUILT_IN_LOCAL  # latest/previous: of this inventory
    old = api.load_run(baseline, request.runs_dir, scope) if baseline else None  # before probing
    base = api.load_baseline(baseline_file) if baseline_file else None  # a bad one: before too
    console = request.console()
    # the report's modules load while the hosts work
    kept = execute_probe(request, warm=("fleet.api.comparing", "fleet.render.terminal.run"))
    run = kept.run
    result = api.cross_host_diff(run, tolerance, request.probe_dirs, cohort_by)
    from fleet.render.terminal.run import render_run  # loaded by warm_up meanwhile

    render_run(console, run, result, str(kept.saved) if kept.saved else None)
    code = probed_exit_code(kept)
    drift = None
    if old is not None:
        drift = (
            api.baseline_drift(old, run, base, tolerance, request.probe_dirs)
            if base is not None
            else api.drift(old, run, tolerance, request.probe_dirs)
        )
        from fleet.render.terminal.diff import drift_view  # only with --baseline: start-up

        console.print(drift_view(drift))
        code = with_bits(code, EXIT_DRIFT if drift.found else 0)
    judged = api.judge_baseline(run, base, request.probe_dirs) if base is not None else None
    verdicts = api.baseline_report(run, judged) if judged is not None else None
    if verdicts is not None:
        from fleet.render.terminal.checks import render_report  # the rules engine: on demand

        console.print()
        render_report(console, verdicts, f"baseline {baseline_file} · {len(run.hosts)} host(s)")
        code = with_bits(code, EXIT_DRIFT if verdicts.failed else 0)
    if request.html_path:
        source = str(kept.saved) if kept.saved else (run.inventory or None)
        page = emit_html(
            request.html_path,
            run,
            result,
            code,
            source,
            drift=drift,
            checks=verdicts,
            baseline=judged,
        )
        code = with_bits(code, page)
    sys.exit(code)
