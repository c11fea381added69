"""`fleet jobs`: every NCCL job across the selected hosts, probed now with the live probe (as
`fleet probe -p live` probes: fleet.cli.probing.probe_and_assess) or read from a saved run (--run).

Exit code: the probe run's bits (fleet.exits; none with --run), and 64 when the run or --json
could not be kept."""

from __future__ import annotations

import sys
from typing import Any

import click

from fleet import api
from fleet.cli.completion import complete_runs
from fleet.cli.options import (
    accept_new_option,
    inventory_option,
    limit_option,
    no_save_option,
    runs_dir_option,
    slurm_options,
    timeout_option,
    together,
    workers_option,
)
from fleet.cli.probing import ProbeRequest, probe_and_assess
from fleet.cli.selection import HostChoice, selection_options
from fleet.errors import StoreError
from fleet.exits import EXIT_NOT_KEPT, with_bits
from fleet.jsontext import dumps_indented
from fleet.render.terminal.console import error_text, make_console
from fleet.units.live.terminal import render_jobs

JOBS_OPTIONS = together(
    inventory_option,
    limit_option,
    click.option(
        "--run",
        "run_ref",
        metavar="RUN",
        shell_complete=complete_runs,
        help="Read this saved run (latest, previous, a path or name) instead of probing.",
    ),
    click.option(
        "--json",
        "json_path",
        metavar="FILE",
        help="Write the fleet.jobs/1 document here ('-': stdout).",
    ),
    runs_dir_option,
    no_save_option,
    timeout_option(api.ProbeOptions.timeout_s, 86400, "Seconds per host, connecting included."),
    accept_new_option,
    slurm_options,
    workers_option,
)


@click.command("jobs")
@JOBS_OPTIONS
@selection_options
def jobs_command(run_ref: str | None, json_path: str | None, **options: Any) -> None:
    """Every NCCL job across the hosts: its ranks (host, pid, GPU, state), libnccl, RAS status.

    Probes the selected hosts with the live probe now, or reads --run RUN. Dead, stopped,
    missing and lagging ranks are named with their host first."""
    exit_code = 0
    if run_ref is not None:  # with -i, latest/previous are that inventory's runs
        view = api.jobs(run_ref, runs_dir=options["runs_dir"], inventory=options["inventory_path"])
    else:
        probed = probe_and_assess(live_request(options), api.Judging())  # judged by no rules
        exit_code = probed.assessment.exit_code  # the probe run's bits, and 64 when not kept
        view = api.jobs(probed.kept.run, where=probed.kept.where)
    console = make_console(stderr=json_path == "-")
    render_jobs(console, view.report, view.where, view.probed_live)
    if json_path == "-":
        click.echo(dumps_indented(view.to_dict()))
    elif json_path:
        exit_code = with_bits(exit_code, _write_json(json_path, view))
    sys.exit(exit_code)


def live_request(options: dict[str, Any]) -> ProbeRequest:
    """What `fleet probe -p PROBE` would be asked (the probe whose unit names `jobs` its COMMAND) with these options: the same probing path."""
    choice = HostChoice.pop_from(options)
    return ProbeRequest(
        probe_list=api.ProbeOptions.probe_run_by("jobs"),
        json_path=None,  # --json is the jobs document here, not the run's
        html_path=None,
        concurrency=api.ProbeOptions.concurrency,
        probe_dirs=(),
        choice=choice,
        **options,
    )


def _write_json(json_path: str, view: api.JobsView) -> int:
    """--json FILE (0600, as the run's); exit bit 64 when it cannot be written."""
    try:
        view.write(json_path)
    except StoreError as exc:
        click.echo(error_text(exc), err=True)  # the jobs were shown; only writing them failed
        return EXIT_NOT_KEPT
    return 0
