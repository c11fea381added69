"""`fleet report`: one self-contained HTML page for a saved run (fleet/render/html/page.py), and the
`--html FILE` of `fleet probe` and `fleet check`.

fleet.cli.main registers this command lazily (FleetGroup.LAZY) and imports `emit_html` only when
--html is given: this module imports fleet.cli.main, not the other way.
"""

from __future__ import annotations

from pathlib import Path

import click

from fleet import api
from fleet.analysis.diff import FleetDiff
from fleet.analysis.drift import Drift
from fleet.cli.completion import complete_runs
from fleet.cli.main import (
    EXIT_DRIFT,
    EXIT_NOT_KEPT,
    ProbedRun,
    exit_code,
    runs_dir_option,
    tolerance_option,
    with_bits,
)
from fleet.errors import FleetError
from fleet.models import Run
from fleet.render.html.page import Report, fabric_of, write_html
from fleet.store import default_runs_dir, resolve_run


@click.command("report")
@click.argument("run_ref", metavar="RUN", default="latest", shell_complete=complete_runs)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file to write. Default: fleet-report-<run start>.html here.",
)
@click.option(
    "--baseline",
    metavar="RUN",
    shell_complete=complete_runs,
    help="Add the drift against this saved run.",
)
@click.option(
    "--pack",
    "packs",
    multiple=True,
    help="Add the verdicts of this built-in rule pack (repeatable), as `fleet check` does.",
)
@click.option(
    "--rules",
    "rules_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Add the verdicts of this rules file (repeatable).",
)
@runs_dir_option
@tolerance_option
def report(
    run_ref: str,
    output: Path | None,
    baseline: str | None,
    packs: tuple[str, ...],
    rules_files: tuple[str, ...],
    runs_dir: Path | None,
    tolerance: float,
) -> None:
    """Write one HTML page for a saved run (default: the latest): opens offline, prints, plots."""
    folder = runs_dir or default_runs_dir()
    path = resolve_run(run_ref, folder)
    run = api.load_run(path, folder)
    old = api.load_run(baseline, folder) if baseline else None
    checks = api.check(run, packs, rules_files) if packs or rules_files else None
    drift = api.drift(old, run, tolerance) if old is not None else None
    code = with_bits(exit_code(run), EXIT_DRIFT if drift is not None and drift.found else 0)
    if checks is not None and checks.failed:
        from fleet.cli.check import EXIT_CHECK_FAILED  # check imports this module's emit_html

        code = with_bits(code, EXIT_CHECK_FAILED)
    page = Report(
        run,
        api.cross_host_diff(run, tolerance),
        drift=drift,
        checks=checks,
        fabric=fabric_of(run),
        exit_code=code,
        source=str(path),
    )
    target = output or Path(f"fleet-report-{_stamp(run)}.html")
    written = write_html(page, target)
    click.echo(f"wrote {written} ({written.stat().st_size / 1024:.0f} KiB)")


def _stamp(run: Run) -> str:
    return "".join(c for c in run.started if c.isalnum()) or "run"


def emit_html(page: Report, path: str) -> int:
    """--html of probe and check: write the page; exit bit 64 (like --json) when it cannot be."""
    try:
        write_html(page, Path(path))
    except FleetError as exc:
        click.echo(exc.render(), err=True)
        return EXIT_NOT_KEPT
    return 0


def page_for(probed: ProbedRun, diff: FleetDiff, drift: Drift | None, code: int) -> Report:
    """The page of a run just probed (`fleet probe --html`)."""
    run = probed.run
    source = str(probed.saved) if probed.saved else (run.inventory or None)
    return Report(run, diff, drift=drift, fabric=fabric_of(run), exit_code=code, source=source)
