"""`--openmetrics FILE` of probe, check and show: the run as Prometheus metrics, for
node_exporter's textfile collector (fleet/render/openmetrics.py says what is in it)."""

from __future__ import annotations

from pathlib import Path

import click

from fleet import api
from fleet.cli.options import say_written
from fleet.exits import EXIT_NOT_KEPT

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
