"""The saved runs: `fleet diff` (two runs' drift, or one run's cross-host diff), `fleet show`
(a run again), `fleet runs` (list them, or prune them)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.text import Text

from fleet import api
from fleet.api.commands import RunSummary
from fleet.cli.completion import complete_runs
from fleet.cli.options import (
    baseline_file_option,
    between_option,
    cohort_by_option,
    collection_paused,
    document_option,
    fail_on_option,
    format_option,
    json_from_format,
    limit_option,
    load_run,
    run_argument,
    run_file,
    runs_dir_option,
    scope_option,
    tolerance_option,
    write_json,
)
from fleet.cli.report import openmetrics_option, write_openmetrics
from fleet.errors import UsageError
from fleet.exits import EXIT_NOT_KEPT, exit_code, with_bits
from fleet.render.documents import (
    drift_document,
    drift_markdown,
    fleet_diff_document,
    fleet_diff_markdown,
)
from fleet.render.terminal.assessment import render_probed
from fleet.render.terminal.console import make_console
from fleet.render.terminal.diff import drift_view, fleet_diff_view
from fleet.render.terminal.findings import render_findings
from fleet.render.terminal.tables import Column, print_table


@click.command()
@click.argument("old", shell_complete=complete_runs)
@click.argument("new", required=False, shell_complete=complete_runs)
@runs_dir_option
@scope_option
@limit_option
@tolerance_option()
@format_option(help="How to print the diff (json: the old spelling of --json -).")
@document_option("the diff or drift document (fleet.diff)")
@cohort_by_option
@fail_on_option
@between_option
@baseline_file_option(
    "--baseline-file",
    help="Drift: judge each measurement's change against its band in this baseline file (the "
    "noise of known-good runs) instead of --tolerance, which stays for those it has no band for.",
)
@collection_paused
def diff(
    old: str,
    new: str | None,
    runs_dir: Path | None,
    scope: str | None,
    limit: str | None,
    tolerance: float,
    output_format: str,
    json_path: str | None,
    cohort_by: str | None,
    between: bool,
    fail_on: str | None,
    baseline_file: str | None,
) -> None:
    """Drift between two saved runs (OLD NEW), or the cross-host diff of one run (OLD).

    Runs are files, names from the runs folder, `latest` or `previous` (`latest:INVENTORY`: that
    inventory's). Drift compares the hosts both runs selected (and --limit selects, by host
    name); the others are named as left out. Exit code 16 when drift is found, 0 when none."""
    output_format, json_path = json_from_format(output_format, json_path)
    if baseline_file and new is None:
        raise UsageError(
            "--baseline-file judges drift between two runs: give OLD and NEW",
            hint=f"one run against a baseline: fleet check --run {old} --baseline-file "
            f"{baseline_file}",
        )
    if new is None:
        if limit:
            raise UsageError("--limit narrows the drift of two runs", hint="give OLD and NEW")
        judging = api.Judging(tolerance=tolerance, cohort_by=cohort_by, rules=True, fail_on=fail_on)
        assessment = api.assess_run(load_run(old, runs_dir, scope), judging, old)
        sys.exit(print_fleet_diff(assessment, output_format, json_path, between))  # 32: --fail-on
    judging = api.Judging(
        tolerance=tolerance,
        baseline_run=str(run_file(old, runs_dir, scope)),  # OLD first: a missing one is said first
        rules=True,  # the new run's findings lead; the drift's exit bit is 16 alone
        divergence=False,  # what changed is the drift's to say; fleet diff NEW for the rest
        fail_on=fail_on,
        baseline_file=baseline_file,
        runs_dir=runs_dir,
        scope=scope,
        limit=limit,
    )
    assessment = api.assess_run(load_run(new, runs_dir, scope), judging, new)
    sys.exit(print_drift(assessment, output_format, json_path))


def print_fleet_diff(
    assessment: api.Assessment,
    output_format: str,
    json_path: str | None = None,
    between: bool = False,
) -> int:
    """The run's cross-host diff as `output_format`, its document to --json; the exit code (32:
    --fail-on; 64: --json FILE could not be written)."""
    result = assessment.diff
    written = json_path is None or write_json(fleet_diff_document(result), json_path)
    if output_format == "markdown":  # for an issue: what is wrong first
        click.echo(
            fleet_diff_markdown(result, between, assessment.findings, assessment.run), nl=False
        )
    elif json_path != "-":  # the document lists every differing fact, --between or not
        console = make_console()
        render_findings(console, assessment.findings, exit_code=assessment.exit_code)
        console.print(fleet_diff_view(result, between), crop=False)  # paths stay whole
    return assessment.exit_code | (0 if written else EXIT_NOT_KEPT)


def print_drift(assessment: api.Assessment, output_format: str, json_path: str | None) -> int:
    """The drift as `output_format`, its document to --json; the exit code (16: drift found)."""
    drift = assessment.drift
    assert drift is not None  # judging names an earlier run
    document = None if json_path is None else drift_document(drift, assessment.findings)
    written = json_path is None or write_json(document, json_path)
    if output_format == "markdown":
        click.echo(drift_markdown(drift, assessment.findings), nl=False)
    elif json_path != "-":
        console = make_console()
        render_findings(console, assessment.findings, exit_code=assessment.exit_code)
        console.print(drift_view(drift), crop=False)
    return assessment.exit_code | (0 if written else EXIT_NOT_KEPT)


@click.command()
@run_argument
@runs_dir_option
@scope_option
@tolerance_option()
@format_option(help="How to print the diff (json: the old spelling of --json -).")
@document_option("the run's cross-host diff document (fleet.diff)")
@cohort_by_option
@fail_on_option
@between_option
@openmetrics_option
@collection_paused
def show(
    run_ref: str,
    runs_dir: Path | None,
    scope: str | None,
    tolerance: float,
    output_format: str,
    json_path: str | None,
    cohort_by: str | None,
    fail_on: str | None,
    between: bool,
    openmetrics_path: str | None,
) -> None:
    """Render a saved run again (default: the latest)."""
    output_format, json_path = json_from_format(output_format, json_path)
    run = load_run(run_ref, runs_dir, scope)
    judging = api.Judging(tolerance=tolerance, cohort_by=cohort_by, rules=True, fail_on=fail_on)
    assessment = api.assess_run(run, judging, run_ref)
    if openmetrics_path is not None:  # the run's own exit code: its probing's bits
        probed = with_bits(exit_code(run), assessment.exit_code)
        kept = write_openmetrics(openmetrics_path, assessment, probed)
        assessment = assessment.with_exit_bits(kept.exit_code & EXIT_NOT_KEPT)
    if output_format != "terminal" or json_path == "-":
        sys.exit(print_fleet_diff(assessment, output_format, json_path, between))
    code = assessment.exit_code  # 0, or 32 with --fail-on
    if json_path is not None and not write_json(fleet_diff_document(assessment.diff), json_path):
        code |= EXIT_NOT_KEPT
    if run.fabric is not None:  # a `fleet fabric` run: its pairs and suspects, not probe tables
        from fleet.render.terminal.fabric import render_fabric

        render_fabric(make_console(), run.fabric, list(run.hosts))
    else:
        render_probed(make_console(), assessment, None, between=between)
    sys.exit(code)


RUNS_COLUMNS = (
    Column("run", whole=True),
    Column("started", whole=True, keep=1),
    Column("inventory", whole=True, keep=3),
    Column("hosts", keep=4, justify="right"),
    Column("statuses", keep=2),
)


@click.command()
@runs_dir_option
@click.option("--prune", is_flag=True, help="Delete old runs (with --keep and/or --older-than).")
@click.option("--keep", type=click.IntRange(0), metavar="N", help="--prune: keep the N newest.")
@click.option(
    "--older-than", metavar="AGE", help="--prune: delete runs older than AGE (45m, 12h, 30d, 2w)."
)
@click.option("--dry-run", is_flag=True, help="--prune: say what would be deleted, delete nothing.")
@document_option("the list of saved runs (fleet.runs/1)")
def runs(
    runs_dir: Path | None,
    prune: bool,
    keep: int | None,
    older_than: str | None,
    dry_run: bool,
    json_path: str | None,
) -> None:
    """List the saved runs: when, which inventory, how many hosts, their statuses."""
    saved = api.saved_runs(runs_dir)
    if prune or keep is not None or older_than or dry_run:
        prune_command(saved.folder, len(saved.paths), prune, keep, older_than, dry_run)
        return
    summaries = saved.summaries()
    if json_path is not None and not write_json(saved.document(summaries), json_path):
        sys.exit(EXIT_NOT_KEPT)
    if json_path != "-":
        rows = [_run_row(summary) for summary in summaries]
        print_table(make_console(), str(saved.folder), RUNS_COLUMNS, rows)


def _run_row(summary: RunSummary) -> tuple[str | Text, ...]:
    if summary.error is not None:
        return (summary.path.name, "", "", "", Text(summary.error, style="red"))
    counts = ", ".join(f"{n} {s}" for s, n in summary.statuses)
    return (summary.path.stem, summary.started, summary.inventory, str(summary.hosts), counts)


def prune_command(
    folder: Path,
    total: int,
    prune: bool,
    keep: int | None,
    older_than: str | None,
    dry_run: bool,
) -> None:
    """`fleet runs --prune`: delete what --keep / --older-than select, naming every run."""
    if not prune or (keep is None and older_than is None):
        raise UsageError(
            "--keep, --older-than and --dry-run go with --prune, which needs one of the first two",
            hint="e.g. fleet runs --prune --keep 20, or fleet runs --prune --older-than 30d",
        )
    doomed = api.prune_runs(folder, keep=keep, older_than=older_than, dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{verb} {len(doomed)} run(s) from {folder}; {total - len(doomed)} kept")
    for path in doomed:
        click.echo(f"  {path.name}")
