"""`fleet report`: one self-contained HTML page for a saved run (api.write_report; the page itself
is fleet/render/html/page.py). `--html FILE` of probe and check writes the same page
(fleet.cli.probing.emit_html).

fleet.cli.root loads this module on the first use of `fleet report` (FleetGroup.LAZY).
"""

from __future__ import annotations

from pathlib import Path

import click

from fleet import api
from fleet.cli.exits import EXIT_CHECK_FAILED, EXIT_DRIFT, exit_code, with_bits
from fleet.cli.options import (
    baseline_file_option,
    baseline_option,
    collection_paused,
    load_run,
    pack_option,
    rules_option,
    run_argument,
    runs_dir_option,
    tolerance_option,
)
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
@collection_paused
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
    path = api.resolve_run(run_ref, runs_dir)
    run = load_run(path)
    old = load_run(baseline, runs_dir) if baseline else None
    base = api.load_baseline(baseline_file) if baseline_file else None
    checks = api.check(run, packs, rules_files) if packs or rules_files else None
    judged = api.judge_baseline(run, base) if base is not None else None
    if judged is not None:
        checks = api.with_baseline(checks, judged) if checks else api.baseline_report(run, judged)
    drift = None
    if old is not None:
        drift = (
            api.baseline_drift(old, run, base, tolerance)
            if base is not None
            else api.drift(old, run, tolerance)
        )
    code = with_bits(exit_code(run), EXIT_DRIFT if drift is not None and drift.found else 0)
    if checks is not None and checks.failed:
        code = with_bits(code, EXIT_CHECK_FAILED)
    target = output or Path(f"fleet-report-{_stamp(run)}.html")
    written = api.write_report(
        run,
        target,
        drift=drift,
        checks=checks,
        exit_code=code,
        source=str(path),
        tolerance=tolerance,
        baseline=judged,
    )
    click.echo(f"wrote {written} ({written.stat().st_size / 1024:.0f} KiB)")


def _stamp(run: Run) -> str:
    return "".join(c for c in run.started if c.isalnum()) or "run"
