"""`fleet probe`: probe the selected hosts, keep the run, show where the hosts differ (and the
drift against --baseline RUN; each host's measurements against --baseline-file FILE's bands)."""

from __future__ import annotations

import sys

import click

from fleet import api
from fleet.cli.options import (
    baseline_file_option,
    baseline_option,
    cohort_by_option,
    fail_on_option,
    tolerance_option,
)
from fleet.cli.probing import ProbeRequest, probe_and_assess, probe_options, write_html
from fleet.cli.report import openmetrics_option, write_openmetrics


@click.command()
@probe_options
@tolerance_option()
@cohort_by_option
@fail_on_option
@openmetrics_option
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
    fail_on: str | None,
    openmetrics_path: str | None,
) -> None:
    """Run the probes on every selected host and show where the hosts differ."""
    judging = api.Judging(
        tolerance=tolerance,
        cohort_by=cohort_by,
        probe_dirs=request.probe_dirs,
        fail_on=fail_on,
        rules=True,  # the built-in pack speaks through findings; only fleet check gates on it
        baseline_run=baseline,
        baseline_file=baseline_file,
        runs_dir=request.runs_dir,
        # latest/previous: of this inventory (-i), else of the hosts' source (-H, --slurm, this
        # machine), as the run records it (fleet/api/comparable.py)
        scope=request.inventory_path,
    )
    # the report's modules load while the hosts work
    probed = probe_and_assess(
        request,
        judging,
        warm=("fleet.api.assessing", "fleet.render.terminal.assessment"),
        json_path=request.json_path,
    )
    from fleet.render.terminal.assessment import render_probed  # loaded by warm_up meanwhile

    saved = probed.kept.saved
    assessment = probed.assessment
    render_probed(request.console(), assessment, str(saved) if saved else None)
    if request.html_path:
        source = str(saved) if saved else (assessment.run.inventory or None)
        assessment = write_html(request.html_path, assessment, source)
    if openmetrics_path is not None:
        assessment = write_openmetrics(openmetrics_path, assessment)
    sys.exit(assessment.exit_code)
