"""A run reported for others: `fleet report`, one self-contained HTML page for a saved run
(api.write_page; the page itself is fleet/render/html/page.py; `--html FILE` of probe and check
writes the same page, fleet.cli.probing.write_html), and `--openmetrics FILE` of probe, check and
show, the run as Prometheus metrics for node_exporter's textfile collector
(fleet/render/openmetrics.py says what is in it).

fleet.cli.root loads this module on the first use of `fleet report` (FleetGroup.LAZY).
"""

from __future__ import annotations

from pathlib import Path

import click

from fleet import api
from fleet.cli.options import (
    baseline_file_option,
    baseline_option,
    collection_paused,
    pack_option,
    resolve_and_load,
    rules_option,
    run_argument,
    runs_dir_option,
    say_written,
    tolerance_option,
)
from fleet.exits import EXIT_NOT_KEPT, exit_code
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


# ------------------------------------------------------------------ --openmetrics FILE

openmetrics_option = click.option(
    "--openmetrics",
    "openmetrics_path",
    metavar="FILE",
    help="Also write the run as Prometheus metrics here (the text format node_exporter's "
    "textfile collector reads; written atomically): findings, health and speed figures, the "
    "run's time and exit code. Name it *.prom in the collector's folder.",
)


def write_openmetrics(
    path: str, assessment: api.Assessment, exit_code: int | None = None
) -> api.Assessment:
    """Write the metrics file, said on stderr; exit bit 64 (like --json) when it cannot be.
    `exit_code`: the one to report (default: the assessment's, this command's)."""
    from fleet.render.openmetrics import openmetrics_text  # only with --openmetrics
    from fleet.render.openmetrics import write_openmetrics as write_text

    code = assessment.exit_code if exit_code is None else exit_code
    text = openmetrics_text(assessment.run, assessment.findings, code)
    target = Path(path)
    try:
        write_text(target, text)
    except OSError as exc:
        click.echo(
            f"error: cannot write the metrics to {path}: {exc.strerror or exc}"
            "\nhint: is the folder there and writable? (node_exporter's "
            "--collector.textfile.directory)",
            err=True,
        )
        return assessment.with_exit_bits(EXIT_NOT_KEPT)
    say_written(target)
    return assessment
