"""`fleet probe`: probe the selected hosts, keep the run, show where the hosts differ (and the
drift against --baseline)."""

from __future__ import annotations

import sys

import click

from fleet import api
from fleet.cli.exits import EXIT_DRIFT, with_bits
from fleet.cli.options import baseline_option, cohort_by_option, tolerance_option
from fleet.cli.probing import (
    ProbeRequest,
    emit_html,
    execute_probe,
    probe_options,
    probed_exit_code,
)
from fleet.render.terminal.diff import drift_view
from fleet.render.terminal.run import render_run


@click.command()
@probe_options
@tolerance_option()
@cohort_by_option
@baseline_option("Also report drift against this saved run (latest, previous, a path or id).")
def probe(
    request: ProbeRequest, tolerance: float, cohort_by: str | None, baseline: str | None
) -> None:
    """Run the probes on every selected host and show where the hosts differ."""
    scope = request.inventory_path or api.BUILT_IN_LOCAL  # latest/previous: of this inventory
    old = api.load_run(baseline, request.runs_dir, scope) if baseline else None  # before probing
    console = request.console()
    kept = execute_probe(request)
    run = kept.run
    result = api.cross_host_diff(run, tolerance, request.probe_dirs, cohort_by)
    render_run(console, run, result, str(kept.saved) if kept.saved else None)
    code = probed_exit_code(kept)
    drift = api.drift(old, run, tolerance, request.probe_dirs) if old is not None else None
    if drift is not None:
        console.print(drift_view(drift))
        code = with_bits(code, EXIT_DRIFT if drift.found else 0)
    if request.html_path:
        source = str(kept.saved) if kept.saved else (run.inventory or None)
        page = emit_html(request.html_path, run, result, code, source, drift=drift)
        code = with_bits(code, page)
    sys.exit(code)
