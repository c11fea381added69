"""`fleet check`: probe (or load a saved run), evaluate rules, print verdicts, gate with the exit code.

Exit code: the probe run's bits (see fleet.exits; none with --run) OR 32 when a rule of
severity `error` fails on some host, or with --strict is unknown or skipped on some host. Warnings
never set it. Without --strict an error rule that was not judged is reported ("check
incomplete"), never shown as passed.
The rules are loaded and validated before any host is contacted.

fleet.cli.root loads this module on the first use of `fleet check` (FleetGroup.LAZY).
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import click

from fleet import api
from fleet.cli.completion import complete_runs
from fleet.cli.options import (
    baseline_file_option,
    fail_on_option,
    format_option,
    pack_option,
    rules_option,
)
from fleet.cli.probing import ProbeRequest, probe_and_assess, probe_options, write_html
from fleet.errors import UsageError
from fleet.exits import EXIT_NOT_KEPT
from fleet.render.documents import findings_list
from fleet.render.jsontext import dumps_indented
from fleet.render.junit import write_junit
from fleet.render.terminal.assessment import render_checked
from fleet.render.terminal.console import make_console


def _packs_epilog() -> str:
    """Where the built-in packs are; click keeps a paragraph that starts with \\b as written, so a
    long path is never broken."""
    names = ", ".join(api.available_packs())
    return (
        f"\b\nBuilt-in rule packs (--pack NAME): {names}, in"
        f"\n  {api.packs_folder()}/NAME.yaml"
        "\nCopy one and edit it to start your own rules file (--rules FILE)."
    )


@click.command("check", epilog=_packs_epilog())
@rules_option("A rules YAML file (repeatable). Copy a built-in pack to start one (see below).")
@pack_option(
    f"A built-in rule pack (repeatable): {', '.join(api.available_packs())}. "
    f"Default, when no --rules: {api.DEFAULT_PACK}."
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
@format_option(
    ("terminal", "json"), "terminal verdicts, or a fleet.check/3 JSON document on stdout."
)
@click.option(
    "--strict",
    is_flag=True,
    help="Error rules that are unknown or skipped on a host count as failures (exit bit 32).",
)
@baseline_file_option(
    "--baseline",
    "--baseline-file",
    help="Also judge each host's measurements against the bands of its cohort in this baseline "
    "file (`fleet baseline` makes one): rules baseline-allreduce, -allreduce-matrix, -fabric.",
)
@click.option(
    "--details",
    is_flag=True,
    help="After the findings, every rule's verdict on every host and why (terminal only).",
)
@fail_on_option
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
    details: bool,
    fail_on: str | None,
) -> None:
    """Pre-flight: probe the hosts (or read --run) and judge them against rules. Exit bit 32 on failure."""
    if output_format == "json" and request.json_path == "-":
        raise UsageError("--format json and --json - both write to stdout", hint="pick one")
    judging = api.Judging(
        probe_dirs=request.probe_dirs,
        packs=packs,
        rules_files=rules_files,
        rules=True,
        gate=True,
        strict=strict,
        fail_on=fail_on,
        baseline_file=baseline_file,
        probe_args=api.inventory_probe_args(
            request.inventory_path, request.choice.inventory_format
        ),
    )
    console = make_console(stderr=output_format == "json" or request.json_path == "-")
    if run_ref is not None:
        assessment = judge_saved_run(request, run_ref, judging)
    else:
        assessment = probe_and_assess(request, judging)[0]
    with api.collection_paused():  # a verdict per rule and host, no garbage: fleet.collector
        if junit_path and not _write_junit(assessment, junit_path):
            assessment = assessment.with_exit_bits(EXIT_NOT_KEPT)
        if output_format == "json":
            click.echo(dumps_indented(check_document(assessment)))
        else:
            render_checked(console, assessment, details)
        if request.html_path:
            assessment = write_html(request.html_path, assessment, assessment.where)
    sys.exit(assessment.exit_code)


# The name fleet.cli.root's FleetGroup loads on first use of `fleet check`.
check: click.Command = check_command


def judge_saved_run(request: ProbeRequest, run_ref: str, judging: api.Judging) -> api.Assessment:
    """check --run: the saved run judged, with no exit bits of probing (it was not probed now).
    Read before the rules: they may read the probes it carries."""
    # with -i, latest/previous are that inventory's runs
    path = api.resolve_run(run_ref, request.runs_dir, request.inventory_path)
    run = api.load_run(path)
    prepared = api.prepare(judging, run.probes)
    with api.collection_paused():
        gc.freeze()  # the run, out of the collector's sight until the command ends
        return api.assess(run, judging, prepared, str(path))


def check_document(assessment: api.Assessment) -> dict[str, Any]:
    """The fleet.check/3 document: the report plus which run and rules it judged."""
    assert assessment.checks is not None  # fleet check always judges rules
    run = assessment.run
    document = assessment.checks.to_dict()
    result = {
        "schema": document.pop("schema"),
        "run": {"started": run.started, "finished": run.finished, "location": assessment.where},
        "rules_from": list(assessment.sources),
        **document,
    }
    if assessment.baseline is not None:
        result["baseline"] = assessment.baseline.to_dict()
    result["line_rate"] = [rate.to_dict() for rate in assessment.line_rates]
    result["findings"] = findings_list(assessment.findings)
    return result


def _write_junit(assessment: api.Assessment, junit_path: str) -> bool:
    """Write the JUnit XML; False (exit bit 64, like --json) when it cannot be written."""
    assert assessment.checks is not None
    try:
        write_junit(
            assessment.checks, Path(junit_path), assessment.run.started, assessment.findings
        )
    except OSError as exc:
        click.echo(f"error: cannot write JUnit XML to {junit_path}: {exc.strerror}", err=True)
        return False
    return True
