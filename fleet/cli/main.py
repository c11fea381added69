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
from typing import TYPE_CHECKING, Any, ClassVar

import click
from rich.console import Console
from rich.text import Text

from fleet import __version__, api
from fleet.analysis.diff import DEFAULT_TOLERANCE, FleetDiff
from fleet.analysis.drift import Drift
from fleet.cli.completion import complete_hosts, complete_probes, complete_runs
from fleet.cli.selection import HostChoice, origin_summary, selection_options
from fleet.errors import FleetError, StoreError, UsageError
from fleet.execution.bundle import Bundle, available_probes
from fleet.execution.fanout import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT_S
from fleet.models import NOT_REACHED, PROBE_TROUBLE, Run
from fleet.render.documents import (
    drift_document,
    drift_markdown,
    fleet_diff_document,
    fleet_diff_markdown,
)
from fleet.render.terminal.console import make_console
from fleet.render.terminal.diff import drift_view, fleet_diff_view
from fleet.render.terminal.progress import ProgressEvents
from fleet.render.terminal.run import render_run
from fleet.render.terminal.tables import Column, print_table
from fleet.store import (
    BUILT_IN_LOCAL,
    default_runs_dir,
    list_runs,
    load_run,
    parse_duration,
    prune_runs,
    write_private_json,
)

if TYPE_CHECKING:
    from fleet.inventory.slurm import SlurmNode

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
    "-l",
    "--limit",
    shell_complete=complete_hosts,
    help="Hosts or groups to select: globs, comma-separated, !PATTERN excludes.",
)


class FleetGroup(click.Group):
    """The one error boundary: a FleetError from any command becomes its message, context and hint
    on stderr and its exit code (2: nothing was contacted). With --debug, its whole cause chain too.

    Loads `fleet check` on first use: its rules engine (jmespath) would cost every other command
    ~50 ms of start-up. fleet.cli.check imports this module, not the other way."""

    LAZY: ClassVar[dict[str, tuple[str, str]]] = {
        "check": ("fleet.cli.check", "check"),
        "report": ("fleet.cli.report", "report"),
        "fabric": ("fleet.cli.fabric", "fabric"),
    }

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
@selection_options
@click.option(
    "--slurm",
    "slurm_target",
    metavar="TARGET",
    help="A Slurm partition's, nodeset's or job's nodes, with their Slurm state "
    "(asks Slurm's controller; contacts no node).",
)
def hosts(
    inventory_path: str | None, limit: str | None, slurm_target: str | None, **choice: Any
) -> None:
    """Print the selected hosts, their resolved settings and where each came from. Contacts nothing."""
    selection = HostChoice.pop_from(choice).select(
        inventory_path, limit, require_files=False, slurm=slurm_target
    )
    states = {n.name: n for n in selection.slurm.nodes} if selection.slurm else {}
    rows = [
        (h.name, h.transport, h.target(), h.python, h.jump or "", h.identity_file or "",
         ",".join(h.groups), ", ".join(h.probe_args),
         slurm_state(states[h.name]) if h.name in states else origin_summary(h))
        for h in selection.hosts
    ]  # fmt: skip
    print_table(make_console(), str(selection.source), HOSTS_COLUMNS, rows)


def slurm_argv(text: str | None) -> tuple[str, ...]:
    """--slurm-args as argv items; Slurm's modules load only when it is given."""
    if not text:
        return ()
    from fleet.transport.slurm import parse_slurm_args

    return parse_slurm_args(text)


def slurm_state(node: SlurmNode) -> str:
    """Where a Slurm node came from, for `fleet hosts`: its state, and why when unusable."""
    usable = "" if node.usable else " (not launched on)"
    reason = f": {node.reason}" if node.reason else ""
    return f"slurm {node.state}{reason}{usable}"


# What `fleet hosts` shows; at 80 columns the least needed columns give way first (keep).
HOSTS_COLUMNS = (
    Column("host", whole=True),
    Column("transport", keep=1),
    Column("target", whole=True, keep=5),
    Column("python", whole=True, keep=4),
    Column("jump", whole=True, keep=3),
    Column("identity", whole=True, keep=2),
    Column("groups", keep=2),
    Column("probe_args", keep=0),
    Column("from", keep=1),
)
RUNS_COLUMNS = (
    Column("run", whole=True),
    Column("started", whole=True, keep=1),
    Column("inventory", whole=True, keep=3),
    Column("hosts", keep=4, justify="right"),
    Column("statuses", keep=2),
)


probe_dir_option = click.option(
    "--probe-dir",
    "probe_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A folder of your own probes (repeatable; also $FLEET_PROBE_DIR, ':'-separated).",
)


@main.command("probes")
@probe_dir_option
def list_probes(probe_dirs: tuple[str, ...]) -> None:
    """List the probes a bundle can carry: fleet's own and yours."""
    for name, probe in available_probes(probe_dirs).items():
        click.echo(f"{name:12} {probe.summary}")


# ------------------------------------------------------------------------------------- probe

# The options of every command that probes hosts (probe, check): connection, selection, probes.
# The hosts of a Slurm cluster (probe, check, fabric): the target, site options, GPUs.
SLURM_OPTIONS = (
    click.option(
        "--slurm",
        "slurm_target",
        metavar="TARGET",
        help="Reach Slurm nodes through srun: partition=NAME, nodes=NODESET or job=ID.",
    ),
    click.option(
        "--slurm-args",
        metavar="'ARGS'",
        help="More srun options, e.g. '--account=a --qos=high --reservation=r' (shell quoting).",
    ),
    click.option(
        "--slurm-gpus",
        default="exclusive",
        show_default=True,
        metavar="exclusive|none|N",
        help="How srun asks for each node's GPUs: whole nodes, nothing, or --gpus-per-node=N.",
    ),
)

PROBE_OPTIONS = (
    inventory_option,
    limit_option,
    click.option(
        "-p",
        "--probes",
        "probe_list",
        shell_complete=complete_probes,
        help="Comma-separated probes to run (default: all).",
    ),
    click.option("--json", "json_path", help="Write the run document here ('-' for stdout)."),
    click.option("--html", "html_path", metavar="FILE", help="Also write the HTML report here."),
    click.option(
        "--runs-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Where runs are saved (default ~/.local/state/fleet/runs).",
    ),
    click.option("--no-save", is_flag=True, help="Do not save the run in the runs folder."),
    click.option(
        "-c",
        "--concurrency",
        type=click.IntRange(1, 100000),
        default=DEFAULT_CONCURRENCY,
        help="Cap on hosts probed at once (default: every selected host, within the open-file "
        "limit; handshakes in flight are bounded by the CPU count either way).",
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
    probe_dir_option,
    *SLURM_OPTIONS,
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
        kwargs["choice"] = HostChoice.pop_from(kwargs)
        request = ProbeRequest(**{k: kwargs.pop(k) for k in list(kwargs) if k in fields})
        return command(request=request, **kwargs)

    for option in reversed(PROBE_OPTIONS):
        wrapper = option(wrapper)
    return selection_options(wrapper)


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
    imports: tuple[str, ...]
    dir_modules: tuple[str, ...]
    allreduce: bool
    quick: bool
    probe_dirs: tuple[str, ...]
    slurm_target: str | None
    slurm_args: str | None
    slurm_gpus: str
    allreduce_matrix: bool
    choice: HostChoice = dataclasses.field(default_factory=HostChoice)

    def console(self) -> Console:
        """Tables go to stdout, unless the run document does (--json -)."""
        return make_console(stderr=self.json_path == "-")

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
            probe_dirs=self.probe_dirs,
            slurm_args=slurm_argv(self.slurm_args),
            slurm_gpus=self.slurm_gpus,
            on_key_recorded=_say_key_recorded,
        )


def _say_key_recorded(line: str) -> None:
    click.echo(f"--accept-new: recorded the host key of {line}", err=True)


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
    selection = request.choice.select(
        request.inventory_path, request.limit, slurm=request.slurm_target
    )
    bundle = api.build_probe_bundle(options)  # bad probe names fail before any host is contacted
    run = asyncio.run(probe_with_progress(selection, bundle, options))
    saved = None if request.no_save else _save(run, request.runs_dir)
    written = _write_json(run, request.json_path) if request.json_path else True
    return ProbedRun(run, saved, kept=written and (request.no_save or saved is not None))


async def probe_with_progress(
    selection: api.Selection, bundle: Bundle, options: api.ProbeOptions
) -> Run:
    """api.probe_async with a live progress display; Ctrl-C ends pending hosts as interrupted.
    Progress goes to stderr: stdout carries the report, whatever the two are connected to."""
    interrupt = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, interrupt.set)
    try:
        progress = Console(stderr=True)
        with ProgressEvents(progress, len(selection.hosts), list(bundle.probes)) as events:
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
    shell_complete=complete_runs,
    metavar="RUN",
    help="Also report drift against this saved run (latest, previous, a path or id).",
)
def probe(request: ProbeRequest, tolerance: float, baseline: str | None) -> None:
    """Run the probes on every selected host and show where the hosts differ."""
    runs_dir = request.runs_dir or default_runs_dir()
    scope = request.inventory_path or BUILT_IN_LOCAL  # latest/previous: of this inventory
    old = open_run(baseline, runs_dir, scope) if baseline else None  # fails before probing
    console = request.console()
    probed = execute_probe(request, console)
    run = probed.run
    result = api.cross_host_diff(run, tolerance, request.probe_dirs)
    render_run(console, run, result, str(probed.saved) if probed.saved else None)
    code = probed.exit_code()
    drift = api.drift(old, run, tolerance, request.probe_dirs) if old is not None else None
    if drift is not None:
        console.print(drift_view(drift))
        code = with_bits(code, EXIT_DRIFT if drift.found else 0)
    if request.html_path:
        from fleet.cli.report import emit_html, page_for  # the HTML renderer only when asked

        code = with_bits(code, emit_html(page_for(probed, result, drift, code), request.html_path))
    sys.exit(code)


def open_run(ref: str, runs_dir: Path, inventory: str | None = None) -> Run:
    return api.load_run(ref, runs_dir, inventory)


runs_dir_option = click.option(
    "--runs-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where runs are saved (default ~/.local/state/fleet/runs).",
)
scope_option = click.option(
    "-i",
    "--inventory",
    "scope",
    metavar="INVENTORY",
    help="latest/previous count only this inventory's runs (path, file name or name; "
    "or write latest:NAME).",
)


@main.command()
@click.argument("old", shell_complete=complete_runs)
@click.argument("new", required=False, shell_complete=complete_runs)
@runs_dir_option
@scope_option
@tolerance_option
@format_option
def diff(
    old: str,
    new: str | None,
    runs_dir: Path | None,
    scope: str | None,
    tolerance: float,
    output_format: str,
) -> None:
    """Drift between two saved runs (OLD NEW), or the cross-host diff of one run (OLD).

    Runs are files, names from the runs folder, `latest` or `previous` (`latest:INVENTORY`: that
    inventory's). Exit code 16 when drift is found, 0 when none."""
    folder = runs_dir or default_runs_dir()
    first = open_run(old, folder, scope)
    if new is None:
        print_fleet_diff(api.cross_host_diff(first, tolerance), output_format)
        return
    drift = api.drift(first, open_run(new, folder, scope), tolerance)
    print_drift(drift, output_format)
    sys.exit(EXIT_DRIFT if drift.found else EXIT_OK)


def print_fleet_diff(result: FleetDiff, output_format: str) -> None:
    if output_format == "json":
        click.echo(json.dumps(fleet_diff_document(result), indent=2, default=str))
    elif output_format == "markdown":
        click.echo(fleet_diff_markdown(result), nl=False)
    else:
        make_console().print(fleet_diff_view(result), crop=False)  # paths stay whole


def print_drift(drift: Drift, output_format: str) -> None:
    if output_format == "json":
        click.echo(json.dumps(drift_document(drift), indent=2, default=str))
    elif output_format == "markdown":
        click.echo(drift_markdown(drift), nl=False)
    else:
        make_console().print(drift_view(drift), crop=False)


@main.command()
@runs_dir_option
@click.option("--prune", is_flag=True, help="Delete old runs (with --keep and/or --older-than).")
@click.option("--keep", type=click.IntRange(0), metavar="N", help="--prune: keep the N newest.")
@click.option(
    "--older-than", metavar="AGE", help="--prune: delete runs older than AGE (45m, 12h, 30d, 2w)."
)
@click.option("--dry-run", is_flag=True, help="--prune: say what would be deleted, delete nothing.")
def runs(
    runs_dir: Path | None, prune: bool, keep: int | None, older_than: str | None, dry_run: bool
) -> None:
    """List the saved runs: when, which inventory, how many hosts, their statuses."""
    folder = runs_dir or default_runs_dir()
    if prune or keep is not None or older_than or dry_run:
        prune_command(folder, prune, keep, older_than, dry_run)
        return
    print_table(make_console(), str(folder), RUNS_COLUMNS, [_run_row(p) for p in list_runs(folder)])


def _run_row(path: Path) -> tuple[str | Text, ...]:
    try:
        run = load_run(path)
    except StoreError as exc:
        return (path.name, "", "", "", Text(exc.message, style="red"))
    statuses = Counter(o.status for o in run.hosts.values())
    counts = ", ".join(f"{n} {s}" for s, n in statuses.most_common())
    return (path.stem, run.started, run.inventory or "", str(len(run.hosts)), counts)


def prune_command(
    folder: Path, prune: bool, keep: int | None, older_than: str | None, dry_run: bool
) -> None:
    """`fleet runs --prune`: delete what --keep / --older-than select, naming every run."""
    if not prune or (keep is None and older_than is None):
        raise UsageError(
            "--keep, --older-than and --dry-run go with --prune, which needs one of the first two",
            hint="e.g. fleet runs --prune --keep 20, or fleet runs --prune --older-than 30d",
        )
    age = parse_duration(older_than) if older_than else None
    total = len(list_runs(folder))
    doomed = prune_runs(folder, keep, age, dry_run)
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{verb} {len(doomed)} run(s) from {folder}; {total - len(doomed)} kept")
    for path in doomed:
        click.echo(f"  {path.name}")


@main.command()
@click.argument("run_ref", metavar="RUN", default="latest", shell_complete=complete_runs)
@runs_dir_option
@scope_option
@tolerance_option
@format_option
def show(
    run_ref: str, runs_dir: Path | None, scope: str | None, tolerance: float, output_format: str
) -> None:
    """Render a saved run again (default: the latest)."""
    run = open_run(run_ref, runs_dir or default_runs_dir(), scope)
    result = api.cross_host_diff(run, tolerance)
    if output_format != "terminal":
        print_fleet_diff(result, output_format)
        return
    if run.fabric is not None:  # a `fleet fabric` run: its pairs and suspects, not probe tables
        from fleet.render.terminal.fabric import render_fabric

        render_fabric(make_console(), run.fabric, list(run.hosts))
        return
    render_run(make_console(), run, result)


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
