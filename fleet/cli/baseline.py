"""`fleet baseline`: a baseline made from known-good runs (per cohort, each measurement's median and
band, and the software they ran), written as YAML; `--show FILE` prints one. Runs are judged
against it by `fleet check --baseline-file FILE` and `fleet probe --baseline-file FILE`.

fleet.cli.root loads this module on the first use of `fleet baseline` (FleetGroup.LAZY).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from fleet.api.baselines import (
    BandWidth,
    baseline_document,
    baseline_text,
    load_baseline,
    make_baseline,
    write_baseline,
)
from fleet.cli.completion import complete_runs
from fleet.cli.options import (
    cohort_by_option,
    document_option,
    runs_dir_option,
    scope_option,
    write_json,
)
from fleet.errors import UsageError
from fleet.exits import EXIT_NOT_KEPT
from fleet.render.terminal.baseline import render_baseline
from fleet.render.terminal.console import make_console


@click.command("baseline")
@click.argument("runs", nargs=-1, metavar="[RUN]...", shell_complete=complete_runs)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Write the baseline here (YAML; '-' for stdout). Commit it beside the inventory.",
)
@document_option("the baseline as a JSON document (fleet.baseline/1)")
@click.option(
    "--show",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Print this baseline file (what it was made from and on, each cohort's bands).",
)
@click.option(
    "--all", "every", is_flag=True, help="Every measurement (default: 12 per family and cohort)."
)
@click.option(
    "-k",
    "k",
    type=click.FloatRange(0, 100, min_open=True),
    default=BandWidth.k,
    show_default=True,
    help="Band half-width in standard deviations estimated from the MAD (1.4826 × MAD each).",
)
@click.option(
    "--floor",
    type=click.FloatRange(0, 1, max_open=True),
    default=BandWidth.floor,
    show_default=True,
    help="The band's least half-width, as a share of the median (noise one run cannot show).",
)
@cohort_by_option
@runs_dir_option
@scope_option
def baseline(
    runs: tuple[str, ...],
    output: str | None,
    json_path: str | None,
    show: str | None,
    every: bool,
    k: float,
    floor: float,
    cohort_by: str | None,
    runs_dir: Path | None,
    scope: str | None,
) -> None:
    """Make a baseline from known-good RUNs (files, saved runs' names, latest, previous): per
    cohort, each measurement's median and band, median ± max(floor × median, min(k × 1.4826 ×
    MAD, spread + floor × median)), spread the farthest run's distance from the median.

    \b
      fleet baseline run1.json run2.json run3.json -o baseline.yaml
      fleet baseline --show baseline.yaml
      fleet check -i inv.yaml --baseline-file baseline.yaml
    """
    if show is not None:
        if runs or output or json_path:
            raise UsageError("--show prints a baseline file: give no RUN, -o or --json with it")
        render_baseline(make_console(), load_baseline(show), every)
        return
    _check_outputs(runs, output, json_path)
    made = make_baseline(runs, runs_dir, scope, k=k, floor=floor, cohort_by=cohort_by)
    if json_path is not None and not write_json(baseline_document(made), json_path):
        sys.exit(EXIT_NOT_KEPT)
    if output == "-":
        click.echo(baseline_text(made), nl=False)
        return
    if not output:
        return
    written = write_baseline(made, output)  # then shown as --show shows it, with what it holds
    console = make_console()
    render_baseline(console, load_baseline(written), every)
    measurements = sum(len(c.bands) for c in made.cohorts.values())
    console.print()
    console.print(
        f"[green]wrote {written}[/]: {len(made.cohorts)} cohort(s), {measurements} "
        f"measurement(s) from {len(made.runs)} run(s)"
    )


def _check_outputs(runs: tuple[str, ...], output: str | None, json_path: str | None) -> None:
    """Runs to make the baseline from, and one place at least for it to go."""
    if not runs:
        raise UsageError(
            "name the known-good runs to make the baseline from",
            hint="e.g. fleet baseline previous latest -o baseline.yaml (or --show FILE)",
        )
    if not output and not json_path:
        raise UsageError(
            "where should the baseline go? -o FILE (YAML) or --json FILE ('-' for stdout)"
        )
    if output == "-" and json_path == "-":
        raise UsageError("-o - and --json - both write to stdout: give one")
