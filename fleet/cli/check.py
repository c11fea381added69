"""`fleet check`: probe (or load a saved run), evaluate rules, print verdicts, gate with the exit code.

Exit code: the probe run's bits (see fleet.cli.exits; none with --run) OR 32 when a rule of
severity `error` fails on some host, or with --strict is unknown or skipped on some host. Warnings
never set it. Without --strict an error rule that was not judged is reported ("check
incomplete"), never shown as passed.
The rules are loaded and validated before any host is contacted.

fleet.cli.root loads this module on the first use of `fleet check` (FleetGroup.LAZY).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fleet import api
from fleet.cli.completion import complete_runs
from fleet.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, kept_bits, with_bits
from fleet.cli.options import baseline_file_option, format_option, pack_option, rules_option
from fleet.cli.probing import (
    ProbeRequest,
    emit_html,
    execute_probe,
    probe_options,
    probed_exit_code,
)
from fleet.errors import UsageError
from fleet.models import Run
from fleet.render.jsontext import dumps_indented
from fleet.render.junit import write_junit
from fleet.render.terminal.baseline import render_line_rates
from fleet.render.terminal.checks import render_report
from fleet.render.terminal.console import make_console

if TYPE_CHECKING:
    from fleet.api import CheckReport


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
    ("terminal", "json"), "terminal verdicts, or a fleet.check/2 JSON document on stdout."
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
) -> None:
    """Pre-flight: probe the hosts (or read --run) and judge them against rules. Exit bit 32 on failure."""
    if output_format == "json" and request.json_path == "-":
        raise UsageError("--format json and --json - both write to stdout", hint="pick one")
    saved = saved_run(request, run_ref) if run_ref is not None else None
    rules, sources = api.load_checks(  # a bad rules file fails before probing
        packs, rules_files, request.probe_dirs, saved[0].probes if saved else ()
    )
    base = api.load_baseline(baseline_file) if baseline_file else None  # so does a bad baseline
    console = make_console(stderr=output_format == "json" or request.json_path == "-")
    run, where, probe_code = saved or probe_run(request)
    with api.collection_paused():  # a verdict per rule and host, no garbage: fleet.collector
        gc.freeze()  # the run, out of the collector's sight until the pause ends
        probe_args = api.inventory_probe_args(
            request.inventory_path, request.choice.inventory_format
        )
        report = api.evaluate(rules, run, probe_args, strict)
        judged = api.judge_baseline(run, base, request.probe_dirs) if base else None
        if judged is not None:
            report = api.with_baseline(report, judged)
            sources = [*sources, f"baseline {baseline_file}"]
        rates = api.line_rates(run, request.probe_dirs)
        kept = _write_junit(report, junit_path, run.started) if junit_path else True
        title = f"fleet check · {', '.join(sources)} · {len(run.hosts)} host(s) · run {where}"
        if output_format == "json":
            document = check_document(report, run, sources, where)
            if judged is not None:
                document["baseline"] = judged.to_dict()
            document["line_rate"] = [rate.to_dict() for rate in rates]
            click.echo(dumps_indented(document))
        else:
            render_report(console, report, title)
            render_line_rates(console, rates)
        code = check_exit_code(report, with_bits(probe_code, kept_bits(kept)))
        if request.html_path:
            diff = api.cross_host_diff(run, probe_dirs=request.probe_dirs)
            page = emit_html(
                request.html_path, run, diff, code, where, checks=report, baseline=judged
            )
            code = with_bits(code, page)
    sys.exit(code)


# The name fleet.cli.root's FleetGroup loads on first use of `fleet check`.
check: click.Command = check_command


def probe_run(request: ProbeRequest) -> tuple[Run, str, int]:
    """The run to judge, probed now: the run, where it is kept, and its exit bits."""
    kept = execute_probe(request)
    return kept.run, kept.where, probed_exit_code(kept)


def saved_run(request: ProbeRequest, run_ref: str) -> tuple[Run, str, int]:
    """check --run: the saved run, where it is, and no exit bits (it was not probed now). Read
    before the rules: they may read the probes it carries."""
    # with -i, latest/previous are that inventory's runs
    path = api.resolve_run(run_ref, request.runs_dir, request.inventory_path)
    return api.load_run(path), str(path), EXIT_OK


def check_exit_code(report: CheckReport, probe_code: int, strict: bool | None = None) -> int:
    """The probe's bits, and 32 when the check fails (`strict`: default, the report's own)."""
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
