"""`fleet check`: probe (or load a saved run), evaluate rules, print verdicts, gate with the exit code.

Exit code: the probe run's bits (see fleet.cli; none with --run) OR 32 when a rule of severity
`error` fails on some host. Warnings, unknown and skipped verdicts are reported, never bit 32.
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

from fleet.checks import CheckReport, Rule, check_unique_ids, evaluate, load_rules
from fleet.checks.packs import available_packs, pack_path
from fleet.cli.main import (
    EXIT_OK,
    ProbeRequest,
    execute_probe,
    fail,
    open_inventory,
    probe_options,
    with_bits,
)
from fleet.errors import FleetError, UsageError
from fleet.execution.bundle import available_probes
from fleet.models import Run
from fleet.render.checks import render_report
from fleet.render.junit import write_junit
from fleet.store import default_runs_dir, load_run, resolve_run

EXIT_CHECK_FAILED = 32
DEFAULT_PACK = "inference"


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
    help="terminal verdicts, or a fleet.check/1 JSON document on stdout.",
)
@probe_options
def check_command(
    request: ProbeRequest,
    rules_files: tuple[str, ...],
    packs: tuple[str, ...],
    run_ref: str | None,
    junit_path: str | None,
    output_format: str,
) -> None:
    """Pre-flight: probe the hosts (or read --run) and judge them against rules. Exit bit 32 on failure."""
    if output_format == "json" and request.json_path == "-":
        fail(UsageError("--format json and --json - both write to stdout", hint="pick one"))
    rules, sources = load_rule_sources(rules_files, packs)  # a bad rules file fails before probing
    console = Console(stderr=output_format == "json" or request.json_path == "-")
    run, where, probe_code = obtain_run(request, run_ref, console)
    report = evaluate(rules, run, inventory_probe_args(request.inventory_path))
    if junit_path:
        _write_junit(report, junit_path, run.started)
    title = f"fleet check · {', '.join(sources)} · {len(run.hosts)} host(s) · run {where}"
    if output_format == "json":
        click.echo(json.dumps(check_document(report, run, sources, where), indent=2, default=str))
    else:
        render_report(console, report, title)
    sys.exit(check_exit_code(report, probe_code))


# The name fleet.cli's FleetGroup loads on first use of `fleet check`.
check: click.Command = check_command


def load_rule_sources(
    rules_files: Sequence[str], packs: Sequence[str]
) -> tuple[list[Rule], list[str]]:
    """Every rule of the packs and files, validated together (ids unique across them)."""
    chosen = list(packs) if packs or rules_files else [DEFAULT_PACK]
    probes = available_probes()
    rules: list[Rule] = []
    sources: list[str] = []
    try:
        for name in chosen:
            rules += load_rules(pack_path(name), probes)
            sources.append(f"pack {name}")
        for path in rules_files:
            rules += load_rules(path, probes)
            sources.append(path)
        check_unique_ids(rules)
    except FleetError as exc:
        fail(exc)
    return rules, sources


def obtain_run(
    request: ProbeRequest, run_ref: str | None, console: Console
) -> tuple[Run, str, int]:
    """The run to judge, where it is, and the exit bits of probing it (0 for a saved run)."""
    if run_ref is None:
        probed = execute_probe(request, console)
        where = str(probed.saved) if probed.saved else f"{probed.run.started} (not saved)"
        return probed.run, where, probed.exit_code()
    try:
        path = resolve_run(run_ref, request.runs_dir or default_runs_dir())
        return load_run(path), str(path), EXIT_OK
    except FleetError as exc:
        fail(exc)


def inventory_probe_args(inventory_path: str | None) -> dict[str, Mapping[str, Any]]:
    """Each host's probe_args (e.g. gpu.expected_count); none without an inventory."""
    if inventory_path is None:
        return {}
    return {name: host.probe_args for name, host in open_inventory(inventory_path).hosts.items()}


def check_exit_code(report: CheckReport, probe_code: int) -> int:
    return with_bits(probe_code, EXIT_CHECK_FAILED if report.failed else 0)


def check_document(
    report: CheckReport, run: Run, sources: Sequence[str], where: str
) -> dict[str, Any]:
    """The fleet.check/1 document: the report plus which run and rules it judged."""
    document = report.to_dict()
    return {
        "schema": document.pop("schema"),
        "run": {"started": run.started, "finished": run.finished, "location": where},
        "rules_from": list(sources),
        **document,
    }


def _write_junit(report: CheckReport, junit_path: str, timestamp: str) -> None:
    try:
        write_junit(report, Path(junit_path), timestamp)
    except OSError as exc:
        fail(UsageError(f"cannot write JUnit XML to {junit_path}: {exc.strerror}"))
