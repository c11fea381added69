"""`fleet report`: one self-contained HTML page for a saved run (api.write_report; the page itself
is fleet/render/html/page.py). `--html FILE` of probe and check writes the same page
(fleet.cli.probing.write_html_and_say).

fleet.cli.root loads this module on the first use of `fleet report` (FleetGroup.LAZY).
"""

from __future__ import annotations

from pathlib import Path

import click

from fleet import api
from fleet.cli.options import (
    baseline_file_option,
    baseline_option,
    gc_paused,
    pack_option,
    resolve_and_load,
    rules_option,
    run_argument,
    runs_dir_option,
    say_written,
    tolerance_option,
)
from fleet.exits import exit_code
from fleet.models import Run


@click.command("report")
@run_argument
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file to write. Default: fleet-report-<run start>.html here.",
)
@baseline_option("Add the drift against this saved run.")
@pack_option("Add the verdicts of this built-in rule pack (repeatable), as `fleet check` does.")
@rules_option("Add the verdicts of this rules file (repeatable).")
@runs_dir_option
@tolerance_option()
@baseline_file_option(
    "--baseline-file",
    help="Judge the run against this baseline file: its verdicts, and its bands drawn behind "
    "the allreduce curves (with --baseline RUN, the drift judged by its bands too).",
)
@gc_paused
def report(
    run_ref: str,
    output: Path | None,
    baseline: str | None,
    packs: tuple[str, ...],
    rules_files: tuple[str, ...],
    runs_dir: Path | None,
    tolerance: float,
    baseline_file: str | None,
) -> None:
    """Write one HTML page for a saved run (default: the latest): opens offline, prints, plots."""
    path, run = resolve_and_load(run_ref, runs_dir)
    judging = api.Judging(
        tolerance=tolerance,
        packs=packs,
        rules_files=rules_files,
        rules=True,  # the findings: the built-in pack when none is named
        gate=bool(packs or rules_files),  # their verdicts shown, and their exit bit
        baseline_run=baseline,
        baseline_file=baseline_file,
        runs_dir=runs_dir,
    )
    # the page shows the exit code fleet would give this run: its hosts' bits too
    assessment = api.assess_run(run, judging, str(path), exit_code(run))
    target = output or Path(f"fleet-report-{_stamp(run)}.html")
    say_written(api.write_page(assessment, target, str(path), tolerance))


def _stamp(run: Run) -> str:
    return "".join(c for c in run.started if c.isalnum()) or "run"
