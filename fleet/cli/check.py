"""`fleet check`: probe (or load a saved run), evaluate rules, print verdicts, gate with the exit code.

Exit code: the probe run's bits (see fleet.cli; none with --run) OR 32 when a rule of severity
`error` fails on some host, or with --strict is unknown or skipped on some host. Warnings never set
it. Without --strict an error rule that was not judged is reported ("check incomplete"), never
shown as passed.
The rules are loaded and validated before any host is contacted.

fleet.cli registers this command at its end, so import fleet.cli (not this module) first: this
module needs cli's probing options, and cli's last lines need `check` from here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from fleet import api
from fleet.checks import CheckReport, evaluate
from fleet.checks.packs import available_packs
from fleet.cli.completion import complete_runs
from fleet.cli.main import (
    EXIT_NOT_KEPT,
    EXIT_OK,
    ProbeRequest,
    execute_probe,
    probe_options,
    with_bits,
)
from fleet.cli.report import emit_html
from fleet.errors import UsageError
from fleet.models import Run
from fleet.render.html.page import Report, fabric_of
from fleet.render.junit import write_junit
from fleet.render.terminal.checks import render_report
from fleet.render.terminal.console import make_console
from fleet.store import default_runs_dir, load_run, resolve_run

EXIT_CHECK_FAILED = 32
DEFAULT_PACK = api.DEFAULT_PACK


@click.command("check")
@click.option(
    "--rules",
    "rules_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A rules YAML file (repeatable). Copy a pack to start one.",
)
@click.option(
    "--pack",
    "packs",
    multiple=True,
    help=f"A built-in rule pack (repeatable): {', '.join(available_packs())}. "
    f"Default, when no --rules: {DEFAULT_PACK}.",
)
@click.option(
    "--run",
    "run_ref",
    metavar="RUN",
    shell_complete=complete_runs,
    help="Evaluate this saved run (latest, previous, a path or file name) instead of probing.",
)
@click.option(
    "--junit", "junit_path", help="Write JUnit XML here: one test case per rule and host."
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["terminal", "json"]),
    default="terminal",
    show_default=True,
    help="terminal verdicts, or a fleet.check/2 JSON document on stdout.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Error rules that are unknown or skipped on a host count as failures (exit bit 32).",
)
@probe_options
def check_command(
    request: ProbeRequest,
    rules_files: tuple[str, ...],
    packs: tuple[str, ...],
    run_ref: str | None,
    junit_path: str | None,
    output_format: str,
    strict: bool,
) -> None:
    """Pre-flight: probe the hosts (or read --run) and judge them against rules. Exit bit 32 on failure."""
    if output_format == "json" and request.json_path == "-":
        raise UsageError("--format json and --json - both write to stdout", hint="pick one")
    rules, sources = api.load_checks(
        packs, rules_files, request.probe_dirs
    )  # a bad rules file fails before probing
    console = make_console(stderr=output_format == "json" or request.json_path == "-")
    run, where, probe_code = obtain_run(request, run_ref, console)
    report = evaluate(rules, run, inventory_probe_args(request))
    kept = _write_junit(report, junit_path, run.started) if junit_path else True
    title = f"fleet check · {', '.join(sources)} · {len(run.hosts)} host(s) · run {where}"
    if output_format == "json":
        click.echo(json.dumps(check_document(report, run, sources, where), indent=2, default=str))
    else:
        render_report(console, report, title)
    code = check_exit_code(report, with_bits(probe_code, 0 if kept else EXIT_NOT_KEPT), strict)
    if request.html_path:
        diff = api.cross_host_diff(run, probe_dirs=request.probe_dirs)
        page = Report(run, diff, checks=report, fabric=fabric_of(run), exit_code=code, source=where)
        code = with_bits(code, emit_html(page, request.html_path))
    sys.exit(code)


# The name fleet.cli's FleetGroup loads on first use of `fleet check`.
check: click.Command = check_command


def obtain_run(
    request: ProbeRequest, run_ref: str | None, console: Console
) -> tuple[Run, str, int]:
    """The run to judge, where it is, and the exit bits of probing it (0 for a saved run)."""
    if run_ref is None:
        probed = execute_probe(request, console)
        where = str(probed.saved) if probed.saved else f"{probed.run.started} (not saved)"
        return probed.run, where, probed.exit_code()
    # with -i, latest/previous are that inventory's runs
    path = resolve_run(run_ref, request.runs_dir or default_runs_dir(), request.inventory_path)
    return load_run(path), str(path), EXIT_OK


def inventory_probe_args(request: ProbeRequest) -> dict[str, Mapping[str, Any]]:
    """Each host's probe_args (e.g. gpu.expected_count); none without an inventory."""
    if request.inventory_path is None:
        return {}
    loaded = api.open_inventory(request.inventory_path, None, request.choice.inventory_format)
    return {name: host.probe_args for name, host in loaded.hosts.items()}


def check_exit_code(report: CheckReport, probe_code: int, strict: bool = False) -> int:
    return with_bits(probe_code, EXIT_CHECK_FAILED if report.fails(strict) else 0)


def check_document(
    report: CheckReport, run: Run, sources: Sequence[str], where: str
) -> dict[str, Any]:
    """The fleet.check/2 document: the report plus which run and rules it judged."""
    document = report.to_dict()
    return {
        "schema": document.pop("schema"),
        "run": {"started": run.started, "finished": run.finished, "location": where},
        "rules_from": list(sources),
        **document,
    }


def _write_junit(report: CheckReport, junit_path: str, timestamp: str) -> bool:
    """Write the JUnit XML; False (exit bit 64, like --json) when it cannot be written."""
    try:
        write_junit(report, Path(junit_path), timestamp)
    except OSError as exc:
        click.echo(f"error: cannot write JUnit XML to {junit_path}: {exc.strerror}", err=True)
        return False
    return True
