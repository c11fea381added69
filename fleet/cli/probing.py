"""What the commands that probe (probe, check) share: their options, declared once and handed
over as one ProbeRequest; probing with a live progress display and Ctrl-C (api.ProbePlan);
and saying what was written and what could not be kept (save, --json, --html: exit bit 64)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import importlib
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from fleet import api
from fleet.cli.completion import complete_probes
from fleet.cli.options import (
    accept_new_option,
    inventory_option,
    json_option,
    limit_option,
    no_save_option,
    probe_dir_option,
    runs_dir_option,
    say_written,
    slurm_options,
    timeout_option,
    together,
    unit_option_keys,
    workers_option,
)
from fleet.cli.selection import HostChoice, selection_options, srun_options
from fleet.errors import FleetError
from fleet.exits import EXIT_NOT_KEPT
from fleet.models import Run
from fleet.render.runjson import print_run_json
from fleet.render.terminal.console import error_text, make_console, stderr_text
from fleet.render.terminal.progress import ProgressEvents

if TYPE_CHECKING:
    from fleet.execution.workers import SeedProcess

# The options of every command that probes hosts (probe, check): connection, selection, probes;
# the probes' own options come from their units (ProbingCommand).
PROBE_OPTIONS = together(
    inventory_option,
    limit_option,
    click.option(
        "-p",
        "--probes",
        "probe_list",
        shell_complete=complete_probes,
        help="Comma-separated probes to run (default: all).",
    ),
    json_option,
    click.option("--html", "html_path", metavar="FILE", help="Also write the HTML report here."),
    runs_dir_option,
    no_save_option,
    click.option(
        "-c",
        "--concurrency",
        type=click.IntRange(1, 100000),
        default=api.ProbeOptions.concurrency,
        help="Cap on hosts probed at once (default: every selected host, within the open-file "
        "limit; handshakes in flight are bounded by the CPU count either way).",
    ),
    timeout_option(api.ProbeOptions.timeout_s, 86400, "Seconds per host, connecting included."),
    accept_new_option,
    probe_dir_option,
    slurm_options,
    workers_option,
)


def probe_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with PROBE_OPTIONS (and, as a ProbingCommand, the units' probe
    options); it receives them as a ProbeRequest `request`."""

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        fields = {f.name for f in dataclasses.fields(ProbeRequest)}
        kwargs["choice"] = HostChoice.pop_from(kwargs)
        kwargs["values"] = {k: kwargs.pop(k) for k in unit_option_keys() if k in kwargs}
        request = ProbeRequest(**{k: kwargs.pop(k) for k in list(kwargs) if k in fields})
        return command(request=request, **kwargs)

    return selection_options(PROBE_OPTIONS(wrapper))


@dataclasses.dataclass(frozen=True)
class ProbeRequest:
    inventory_path: str | None
    limit: str | None
    probe_list: str | None
    json_path: str | None
    html_path: str | None
    runs_dir: Path | None
    no_save: bool
    concurrency: int | None
    timeout_s: float
    accept_new: bool
    probe_dirs: tuple[str, ...]
    slurm_target: str | None
    slurm_args: str | None
    slurm_gpus: str
    workers: int | None = None
    # the probes' own options (their units declare them: fleet/units/PROBE/probe.py), by key
    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    choice: HostChoice = dataclasses.field(default_factory=HostChoice)

    def console(self) -> Console:
        """Tables go to stdout, unless the run document does (--json -)."""
        return make_console(stderr=self.json_path == "-")

    def options(self) -> api.ProbeOptions:
        names = [n.strip() for n in (self.probe_list or "").split(",") if n.strip()]
        return api.ProbeOptions(
            probes=names or None,
            values=self.values,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            accept_new=self.accept_new,
            probe_dirs=self.probe_dirs,
            slurm_args=srun_options(self.slurm_args),
            slurm_gpus=self.slurm_gpus,
            on_key_recorded=_say_key_recorded,
            workers=self.workers,
        )


def _say_key_recorded(line: str) -> None:
    click.echo(f"--accept-new: recorded the host key of {line}", err=True)


# What keeps every probed run (the store, the run writer): loaded while the hosts work, so that
# neither the hosts' start nor the run's end waits for it.
KEEPING = "fleet.api.runs"


def warm_up(*modules: str) -> None:
    """Import `modules` in a thread while the hosts work: what reports on a run (the analysis
    and its renderers, 0.1-0.3 s of imports) need not wait for the hosts, nor the hosts for it.
    fleet has no import circle (tests/unit/test_layout.py), so the two threads' imports cannot
    deadlock; an import that fails here fails again where it is used, and is reported there."""

    def load() -> None:
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - said where the module is used
                continue
        gc.freeze()  # these modules too live as long as the command (see probe_and_assess)

    threading.Thread(target=load, name="fleet-warm-up", daemon=True).start()


def probe_and_assess(
    request: ProbeRequest,
    judging: api.Judging,
    warm: Sequence[str] = (),
    json_path: str | None = None,
) -> api.Probed:
    """What `fleet probe` and `fleet check` do (api.ProbePlan): read what judging needs (a bad
    rules or baseline file fails before any host is contacted), probe and keep the run (its
    document to `json_path`), judge it. What could not be kept is said on stderr (exit bit 64).
    `warm`: modules the command needs afterwards, imported by warm_up once the first host runs
    (sooner, their imports would hold the GIL while the hosts are being started)."""
    seed = _seed_early(request)
    try:
        return _probe_and_assess(request, judging, warm, json_path, seed)
    finally:
        if seed is not None:
            seed.discard()  # a no-op once the run's workers were forked from it


def _seed_early(request: ProbeRequest) -> SeedProcess | None:
    """The workers' seed, started before a big inventory is read (workers.start_seed_early)."""
    if request.slurm_target or request.inventory_path is None or request.workers == 1:
        return None  # decided without loading the workers' module (this machine's run)
    from fleet.execution.workers import start_seed_early

    return start_seed_early(request.inventory_path, request.limit, request.workers)


def _probe_and_assess(
    request: ProbeRequest,
    judging: api.Judging,
    warm: Sequence[str],
    json_path: str | None,
    seed: SeedProcess | None,
) -> api.Probed:
    options = dataclasses.replace(request.options(), seed=seed)
    warm = (KEEPING, *warm)
    plan = api.ProbePlan.make(judging, options, lambda: request.choice.select(
        request.inventory_path, request.limit, slurm=request.slurm_target
    ))  # fmt: skip
    for warning in plan.warnings:  # a broken probe file that was not chosen
        click.echo(stderr_text(f"warning: {warning}"), err=True)
    for note in plan.notes:  # what a rule pack chose where the command line did not
        click.echo(stderr_text(note), err=True)
    # What is imported and built by now (modules, the inventory, the bundle) lives as long as the
    # command: frozen, the collector's full passes no longer walk it again while hosts answer
    # (fleet's own CPU at 1,024 Slurm nodes: about a tenth less).
    gc.freeze()
    probed = asyncio.run(probe_with_progress(request, plan, warm, json_path))
    say_kept(probed.kept.errors, probed.kept.run, json_path, probed.kept.written)
    return probed


async def probe_with_progress(
    request: ProbeRequest, plan: api.ProbePlan, warm: Sequence[str], json_path: str | None
) -> api.Probed:
    """plan.run with a live progress display; Ctrl-C ends pending hosts as interrupted (they
    are kept too). Progress goes to stderr: stdout carries the report, whatever the two are
    connected to."""
    interrupt = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, interrupt.set)
    try:
        progress = Console(stderr=True, emoji=False)  # as make_console: names printed as they are
        with ProgressEvents(
            progress,
            plan.host_count,
            plan.probes,
            first_running=(lambda: warm_up(*warm)) if warm else None,
        ) as events:
            return await plan.run(
                events,
                interrupt,
                save=not request.no_save,
                runs_dir=request.runs_dir,
                json_path=json_file(json_path),
            )
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if interrupt.is_set():  # closing and saving take a moment: a second Ctrl-C waits for them
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def json_file(json_path: str | None) -> str | None:
    """--json's file, for the API to write; `-` (stdout) is say_kept's to print."""
    return None if json_path == "-" else json_path


def say_kept(
    errors: Sequence[FleetError], run: Run, json_path: str | None, written: Sequence[Path] = ()
) -> None:
    """What could not be kept, on stderr; then the run document: on stdout for --json -, and
    each file written (--json FILE) said in one line on stderr."""
    say_not_kept(errors)
    if json_path == "-":
        print_run_json(run, sys.stdout.write)  # a host at a time
    for path in written:
        say_written(path)


def say_not_kept(errors: Sequence[FleetError]) -> None:
    for error in errors:
        click.echo(error_text(error), err=True)  # the run still shows; only keeping it failed


def write_html_and_say(path: str, assessment: api.Assessment, source: str | None) -> api.Assessment:
    """--html of probe and check: write the page, said on stderr; exit bit 64 (like --json)
    when it cannot be."""
    try:
        written = api.write_page(assessment, path, source)
    except FleetError as exc:
        say_not_kept([exc])
        return assessment.with_exit_bits(EXIT_NOT_KEPT)
    say_written(written)
    return assessment
