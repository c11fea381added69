"""`fleet check`: probe (or load a saved run), evaluate rules, print verdicts, gate with the exit code.

Exit code: the probe run's bits (see fleet.exits; none with --run) OR 32 when a rule of
severity `error` fails on some host, or with --strict is unknown or skipped on some host. Warnings
never set it. Without --strict an error rule that was not judged is reported ("check
incomplete"), never shown as passed.
The rules are loaded and validated before any host is contacted.

fleet.cli.root loads this module on the first use of `fleet check` (FleetGroup.LAZY).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from fleet import api
from fleet.api.checking import rule_packs
from fleet.api.hosts import inventory_probe_args
from fleet.api.runs import collection_paused
from fleet.cli.completion import complete_runs
from fleet.cli.draining import DRAIN_OPTIONS, Operation, operate
from fleet.cli.options import (
    ProbingCommand,
    baseline_file_option,
    fail_on_option,
    format_option,
    json_from_format,
    pack_option,
    resolve_and_load,
    rules_option,
    say_written,
    write_json,
)
from fleet.cli.probing import (
    ProbeRequest,
    probe_and_assess,
    probe_options,
    write_html_and_say,
)
from fleet.cli.report import openmetrics_option, write_openmetrics_and_say
from fleet.errors import UsageError
from fleet.exits import EXIT_NOT_KEPT
from fleet.models import Host
from fleet.render.junit import write_junit
from fleet.render.terminal.assessment import render_checked
from fleet.render.terminal.console import make_console, stderr_text


def _packs_epilog() -> str:
    """Where the built-in packs are; click keeps a paragraph that starts with \\b as written, so a
    long path is never broken."""
    packs = rule_packs()
    return (
        f"\b\nBuilt-in rule packs (--pack NAME): {', '.join(packs.names)}, in"
        f"\n  {packs.folder}/NAME.yaml"
        "\nCopy one and edit it to start your own rules file (--rules FILE)."
    )


@click.command("check", cls=ProbingCommand, epilog=_packs_epilog())
@rules_option("A rules YAML file (repeatable). Copy a built-in pack to start one (see below).")
@pack_option(
    f"A built-in rule pack (repeatable): {', '.join(rule_packs().names)}. "
    f"Default, when no --rules: {rule_packs().default}."
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
@format_option(("terminal", "json"), "json: the old spelling of --json - (deprecated).")
@click.option(
    "--strict",
    is_flag=True,
    help="Error rules that are unknown or skipped on a host count as failures (exit bit 32).",
)
@baseline_file_option(
    "--baseline-file",
    help="Also judge each host's measurements against the bands of its cohort in this baseline "
    "file (`fleet baseline` makes one): rules baseline-allreduce, -allreduce-matrix, -fabric.",
)
@click.option(
    "--baseline",
    "old_baseline",
    metavar="FILE",
    hidden=True,  # the old spelling of --baseline-file, for one release
)
@click.option(
    "--details",
    is_flag=True,
    help="After the findings, every rule's verdict on every host and why (terminal only).",
)
@fail_on_option
@DRAIN_OPTIONS
@openmetrics_option
@probe_options
def check_command(
    request: ProbeRequest,
    rules_files: tuple[str, ...],
    packs: tuple[str, ...],
    run_ref: str | None,
    junit_path: str | None,
    output_format: str,
    strict: bool,
    baseline_file: str | None,
    old_baseline: str | None,
    details: bool,
    fail_on: str | None,
    openmetrics_path: str | None,
    **drain: bool,
) -> None:
    """Pre-flight: probe the hosts (or read --run) and judge them against rules. Exit bit 32 on failure."""
    baseline_file = _baseline_file(baseline_file, old_baseline)
    output_format, json_path = json_from_format(output_format, request.json_path)
    judging = api.Judging(
        probe_dirs=request.probe_dirs,
        packs=packs,
        rules_files=rules_files,
        rules=True,
        gate=True,
        strict=strict,
        fail_on=fail_on,
        baseline_file=baseline_file,
        probe_args=inventory_probe_args(request.inventory_path, request.choice.inventory_format),
    )
    console = make_console(stderr=json_path == "-")
    operation = Operation.pop_from(drain)
    operation.check(run_ref)
    hosts: tuple[Host, ...] = ()
    if run_ref is not None:
        # with -i, latest/previous are that inventory's runs
        path, run = resolve_and_load(run_ref, request.runs_dir, request.inventory_path)
        assessment = api.assess_run(run, judging, str(path), limit=request.limit)
    else:
        probed = probe_and_assess(request, judging)
        assessment, hosts = probed.assessment, probed.hosts
    with collection_paused():  # a verdict per rule and host, no garbage: fleet.collector
        assessment = _say_checked(assessment, console, details, junit_path, json_path, request)
    if operation.wanted:
        probed_now = request if run_ref is None else None
        assessment = operate(operation, assessment, hosts, probed_now, judging)
    if openmetrics_path is not None:
        assessment = write_openmetrics_and_say(openmetrics_path, assessment)
    sys.exit(assessment.exit_code)


def _say_checked(
    assessment: api.Assessment,
    console: Console,
    details: bool,
    junit_path: str | None,
    json_path: str | None,
    request: ProbeRequest,
) -> api.Assessment:
    """--junit, --json, the terminal (on stderr when the document is on stdout), --html; a file
    that could not be written sets exit bit 64."""
    if junit_path and not _write_junit(assessment, junit_path):
        assessment = assessment.with_exit_bits(EXIT_NOT_KEPT)
    if json_path is not None and not write_json(assessment.check_document(), json_path):
        assessment = assessment.with_exit_bits(EXIT_NOT_KEPT)
    render_checked(console, assessment, details)
    if request.html_path:
        assessment = write_html_and_say(request.html_path, assessment, assessment.where)
    return assessment


def _baseline_file(baseline_file: str | None, old_baseline: str | None) -> str | None:
    """`--baseline FILE`, the spelling of --baseline-file until this release: still read (a
    saved run given there is refused by api.load_baseline, naming fleet diff and probe)."""
    if old_baseline is None:
        return baseline_file
    if baseline_file is not None:
        raise UsageError("--baseline is the old spelling of --baseline-file: give one of them")
    click.echo(
        "warning: fleet check --baseline FILE is deprecated: write --baseline-file FILE "
        "(--baseline names a saved run in every other command)",
        err=True,
    )
    return old_baseline


# The name fleet.cli.root's FleetGroup loads on first use of `fleet check`.
check: click.Command = check_command


def _write_junit(assessment: api.Assessment, junit_path: str) -> bool:
    """Write the JUnit XML; False (exit bit 64, like --json) when it cannot be written."""
    assert assessment.checks is not None
    try:
        write_junit(
            assessment.checks, Path(junit_path), assessment.run.started, assessment.findings
        )
    except OSError as exc:
        click.echo(
            stderr_text(f"error: cannot write JUnit XML to {junit_path}: {exc.strerror}"), err=True
        )
        return False
    say_written(Path(junit_path))
    return True
