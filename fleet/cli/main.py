"""The `fleet` command. The only module that exits the process and maps outcomes to exit codes.

Exit codes are a bitmask (see README): 0 all ok; 2 usage or inventory error (nothing contacted);
4 some host not reached; 8 some probe failed or timed out; 130 interrupted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import importlib
import json
import logging
import signal
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import click
from rich.console import Console
from rich.table import Table

from fleet import __version__, api
from fleet.analysis.diff import DEFAULT_TOLERANCE, FleetDiff
from fleet.analysis.drift import Drift
from fleet.errors import FleetError, StoreError
from fleet.execution.bundle import Bundle, available_probes
from fleet.execution.fanout import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT_S
from fleet.models import NOT_REACHED, PROBE_TROUBLE, Run
from fleet.render.diffview import drift_view, fleet_diff_view
from fleet.render.documents import (
    drift_document,
    drift_markdown,
    fleet_diff_document,
    fleet_diff_markdown,
)
from fleet.render.terminal import ProgressEvents, render_run
from fleet.store import default_runs_dir, list_runs, load_run, write_private_json

log = logging.getLogger("fleet")

EXIT_OK, EXIT_USAGE, EXIT_UNREACHED, EXIT_PROBE_FAILED, EXIT_DRIFT = 0, 2, 4, 8, 16
EXIT_NOT_KEPT = 64  # the run was probed but could not be saved (or its --json written)
EXIT_INTERRUPTED = 130


def with_bits(code: int, bits: int) -> int:
    """`code` with more bits set, unless it is 130: an interrupted run reports only that."""
    return code if code == EXIT_INTERRUPTED else code | bits


def exit_code(run: Run) -> int:
    if run.interrupted:
        return EXIT_INTERRUPTED
    code = EXIT_OK
    statuses = {o.status for o in run.hosts.values()}
    if statuses & NOT_REACHED:
        code |= EXIT_UNREACHED
    if statuses & PROBE_TROUBLE:
        code |= EXIT_PROBE_FAILED
    return code


inventory_option = click.option(
    "-i",
    "--inventory",
    "inventory_path",
    type=click.Path(dir_okay=False),
    help="Inventory YAML. Default: this machine only (like -i inventory/local.yaml).",
)
limit_option = click.option(
    "-l", "--limit", help="Hosts or groups to select: globs, comma-separated, !PATTERN excludes."
)


class FleetGroup(click.Group):
    """The one error boundary: a FleetError from any command becomes its message, context and hint
    on stderr and its exit code (2: nothing was contacted). With --debug, its whole cause chain too.

    Loads `fleet check` on first use: its rules engine (jmespath) would cost every other command
    ~50 ms of start-up. fleet.cli.check imports this module, not the other way."""

    LAZY: ClassVar[dict[str, tuple[str, str]]] = {"check": ("fleet.cli.check", "check")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command: click.Command | None
        if cmd_name in self.LAZY:
            module, attribute = self.LAZY[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
        else:
            command = super().get_command(ctx, cmd_name)
        if command is not None and not any(p.name == "debug" for p in command.params):
            command.params.append(debug_flag())  # every command takes --debug, before or after
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FleetError as exc:
            log.debug("%s", type(exc).__name__, exc_info=exc)  # --debug: the cause chain
            click.echo(exc.render(), err=True)
            ctx.exit(exc.exit_code)


def enable_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--debug: log fleet's steps and print each failed host's exception chain on stderr."""
    if value and not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("debug: %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)


def debug_flag() -> click.Option:
    return click.Option(
        ["--debug"],
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=enable_debug,
        help="Log what fleet does and print each failure's cause chain (asyncssh, OS errno).",
    )


@click.group(cls=FleetGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fleet")
def main() -> None:
    """Probe many GPU hosts over SSH at once and show where they differ."""


main.params.append(debug_flag())


# ------------------------------------------------------------------------------------- hosts


@main.command()
@inventory_option
@limit_option
def hosts(inventory_path: str | None, limit: str | None) -> None:
    """Print the selected hosts and their resolved settings. Contacts nothing."""
    selection = api.select_hosts(inventory_path, limit)
    table = Table(title=f"{selection.source}", title_justify="left")
    for column in ("host", "transport", "target", "python", "jump", "groups", "probe_args"):
        table.add_column(column, overflow="fold")
    for host in selection.hosts:
        table.add_row(
            host.name,
            host.transport,
            host.target(),
            host.python,
            host.jump or "",
            ",".join(host.groups),
            ", ".join(host.probe_args),
        )
    Console().print(table)


@main.command("probes")
def list_probes() -> None:
    """List the probes a bundle can carry."""
    for name, probe in available_probes().items():
        click.echo(f"{name:12} {probe.summary}")


# ------------------------------------------------------------------------------------- probe

# The options of every command that probes hosts (probe, check): connection, selection, probes.
PROBE_OPTIONS = (
    inventory_option,
    limit_option,
    click.option(
        "-p", "--probes", "probe_list", help="Comma-separated probes to run (default: all)."
    ),
    click.option("--json", "json_path", help="Write the run document here ('-' for stdout)."),
    click.option(
        "--runs-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Where runs are saved (default ~/.local/state/fleet/runs).",
    ),
    click.option("--no-save", is_flag=True, help="Do not save the run in the runs folder."),
    click.option(
        "-c",
        "--concurrency",
        type=click.IntRange(1, 10000),
        default=DEFAULT_CONCURRENCY,
        show_default=True,
        help="Hosts probed at once.",
    ),
    click.option(
        "-t",
        "--timeout",
        "timeout_s",
        type=click.FloatRange(5, 86400),
        default=DEFAULT_TIMEOUT_S,
        show_default=True,
        help="Seconds per host, connecting included.",
    ),
    click.option(
        "--accept-new",
        is_flag=True,
        help="Record unknown host keys in fleet's own known_hosts (changed keys: never).",
    ),
    click.option(
        "--import",
        "imports",
        multiple=True,
        metavar="SPEC",
        help="Import spec for the imports probe, e.g. 'mod:Name|AltName' (repeatable).",
    ),
    click.option(
        "--dir",
        "dir_modules",
        multiple=True,
        metavar="MODULE",
        help="Module whose dir() the dir probe dumps (repeatable).",
    ),
    click.option(
        "--allreduce/--no-allreduce",
        default=True,
        show_default=True,
        help="Run the allreduce timing probe.",
    ),
    click.option("--quick", is_flag=True, help="Fewer message sizes and iterations."),
    click.option(
        "--allreduce-matrix",
        is_flag=True,
        help="Also time every NCCL algorithm x protocol and torch symmetric-memory allreduce, "
        "and name the winner per size (per-host timeout at least 300 s).",
    ),
)


def probe_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with PROBE_OPTIONS; it receives them as a ProbeRequest `request`."""

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        fields = {f.name for f in dataclasses.fields(ProbeRequest)}
        request = ProbeRequest(**{k: kwargs.pop(k) for k in list(kwargs) if k in fields})
        return command(request=request, **kwargs)

    for option in reversed(PROBE_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


@dataclasses.dataclass(frozen=True)
class ProbeRequest:
    inventory_path: str | None
    limit: str | None
    probe_list: str | None
    json_path: str | None
    runs_dir: Path | None
    no_save: bool
    concurrency: int
    timeout_s: float
    accept_new: bool
    imports: tuple[str, ...]
    dir_modules: tuple[str, ...]
    allreduce: bool
    quick: bool
    allreduce_matrix: bool

    def console(self) -> Console:
        """Tables go to stdout, unless the run document does (--json -)."""
        return Console(stderr=self.json_path == "-")

    def options(self) -> api.ProbeOptions:
        names = [n.strip() for n in (self.probe_list or "").split(",") if n.strip()]
        return api.ProbeOptions(
            probes=names or None,
            allreduce=self.allreduce,
            quick=self.quick,
            allreduce_matrix=self.allreduce_matrix,
            imports=self.imports,
            dir_modules=self.dir_modules,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            accept_new=self.accept_new,
        )


@dataclasses.dataclass(frozen=True)
class ProbedRun:
    run: Run
    saved: Path | None
    kept: bool  # False when a save or --json write that was asked for failed

    def exit_code(self) -> int:
        return with_bits(exit_code(self.run), 0 if self.kept else EXIT_NOT_KEPT)


def execute_probe(request: ProbeRequest, console: Console) -> ProbedRun:
    """Probe the selected hosts, save the run and write --json: what every probing command shares."""
    options = request.options()
    selection = api.select_hosts(request.inventory_path, request.limit)
    bundle = api.build_probe_bundle(options)  # bad probe names fail before any host is contacted
    run = asyncio.run(probe_with_progress(selection, bundle, options, console))
    saved = None if request.no_save else _save(run, request.runs_dir)
    written = _write_json(run, request.json_path) if request.json_path else True
    return ProbedRun(run, saved, kept=written and (request.no_save or saved is not None))


async def probe_with_progress(
    selection: api.Selection, bundle: Bundle, options: api.ProbeOptions, console: Console
) -> Run:
    """api.probe_async with a live progress display; Ctrl-C ends pending hosts as interrupted."""
    interrupt = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, interrupt.set)
    try:
        with ProgressEvents(console, len(selection.hosts)) as events:
            return await api.probe_async(selection, bundle, options, events, interrupt)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if interrupt.is_set():  # closing and saving take a moment: a second Ctrl-C waits for them
            signal.signal(signal.SIGINT, signal.SIG_IGN)


tolerance_option = click.option(
    "--tolerance",
    type=click.FloatRange(0.01, 100),
    default=DEFAULT_TOLERANCE,
    show_default=True,
    help="Relative tolerance for measurements (allreduce latency, busbw) against the cohort median.",
)
format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["terminal", "json", "markdown"]),
    default="terminal",
    show_default=True,
    help="How to print the diff.",
)


@main.command()
@probe_options
@tolerance_option
@click.option(
    "--baseline",
    metavar="RUN",
    help="Also report drift against this saved run (latest, previous, a path or id).",
)
def probe(request: ProbeRequest, tolerance: float, baseline: str | None) -> None:
    """Run the probes on every selected host and show where the hosts differ."""
    runs_dir = request.runs_dir or default_runs_dir()
    old = open_run(baseline, runs_dir) if baseline else None  # a bad baseline fails before probing
    console = request.console()
    probed = execute_probe(request, console)
    run = probed.run
    render_run(
        console,
        run,
        api.cross_host_diff(run, tolerance),
        str(probed.saved) if probed.saved else None,
    )
    code = probed.exit_code()
    if old is not None:
        drift = api.drift(old, run, tolerance)
        console.print(drift_view(drift))
        code = with_bits(code, EXIT_DRIFT if drift.found else 0)
    sys.exit(code)


def open_run(ref: str, runs_dir: Path) -> Run:
    return api.load_run(ref, runs_dir)


runs_dir_option = click.option(
    "--runs-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where runs are saved (default ~/.local/state/fleet/runs).",
)


@main.command()
@click.argument("old")
@click.argument("new", required=False)
@runs_dir_option
@tolerance_option
@format_option
def diff(
    old: str, new: str | None, runs_dir: Path | None, tolerance: float, output_format: str
) -> None:
    """Drift between two saved runs (OLD NEW), or the cross-host diff of one run (OLD).

    Runs are files, names from the runs folder, `latest` or `previous`. Exit code 16 when drift is
    found, 0 when none."""
    folder = runs_dir or default_runs_dir()
    first = open_run(old, folder)
    if new is None:
        print_fleet_diff(api.cross_host_diff(first, tolerance), output_format)
        return
    drift = api.drift(first, open_run(new, folder), tolerance)
    print_drift(drift, output_format)
    sys.exit(EXIT_DRIFT if drift.found else EXIT_OK)


def print_fleet_diff(result: FleetDiff, output_format: str) -> None:
    if output_format == "json":
        click.echo(json.dumps(fleet_diff_document(result), indent=2, default=str))
    elif output_format == "markdown":
        click.echo(fleet_diff_markdown(result), nl=False)
    else:
        Console().print(fleet_diff_view(result))


def print_drift(drift: Drift, output_format: str) -> None:
    if output_format == "json":
        click.echo(json.dumps(drift_document(drift), indent=2, default=str))
    elif output_format == "markdown":
        click.echo(drift_markdown(drift), nl=False)
    else:
        Console().print(drift_view(drift))


@main.command()
@runs_dir_option
def runs(runs_dir: Path | None) -> None:
    """List the saved runs: when, which inventory, how many hosts, their statuses."""
    folder = runs_dir or default_runs_dir()
    table = Table(title=str(folder), title_justify="left")
    for column in ("run", "started", "inventory", "hosts", "statuses"):
        table.add_column(column, overflow="fold")
    for path in list_runs(folder):
        try:
            run = load_run(path)
        except StoreError as exc:
            table.add_row(path.name, "", "", "", f"[red]{exc.message}")
            continue
        statuses = Counter(o.status for o in run.hosts.values())
        table.add_row(
            path.stem,
            run.started,
            run.inventory or "",
            str(len(run.hosts)),
            ", ".join(f"{n} {s}" for s, n in statuses.most_common()),
        )
    Console().print(table)


@main.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@runs_dir_option
@tolerance_option
@format_option
def show(run_ref: str, runs_dir: Path | None, tolerance: float, output_format: str) -> None:
    """Render a saved run again (default: the latest)."""
    run = open_run(run_ref, runs_dir or default_runs_dir())
    result = api.cross_host_diff(run, tolerance)
    if output_format != "terminal":
        print_fleet_diff(result, output_format)
        return
    render_run(Console(), run, result)


def _save(run: Run, runs_dir: Path | None) -> Path | None:
    try:
        return api.save_run(run, runs_dir)
    except FleetError as exc:
        click.echo(exc.render(), err=True)  # the run still shows; only saving failed
        return None


def _write_json(run: Run, json_path: str) -> bool:
    document: Mapping[str, Any] = run.to_dict()
    if json_path == "-":
        click.echo(json.dumps(document, indent=2))
        return True
    try:
        write_private_json(Path(json_path), dict(document))
    except OSError as exc:
        click.echo(f"error: cannot write {json_path}: {exc.strerror}", err=True)
        return False
    return True
