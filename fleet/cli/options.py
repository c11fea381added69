"""The options more than one command takes, each declared once (click's own decorators.py way):
a decorator, or a function that makes one where two commands word or bound it differently.
The host-choosing options (-H, --user, --ssh-config, …) are in fleet.cli.selection."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from fleet import api
from fleet.cli.completion import complete_hosts, complete_runs
from fleet.collector import paused as collection_paused
from fleet.errors import UsageError
from fleet.jsontext import write_indented
from fleet.models import DEFAULT_TOLERANCE, Run
from fleet.render.terminal.console import stderr_text

F = TypeVar("F", bound=Callable[..., Any])


def load_for_command(
    ref: str | Path, runs_dir: Path | None = None, scope: str | None = None
) -> Run:
    """A saved run for a command that works on it until it exits (api.load_run, frozen)."""
    return api.load_run(ref, runs_dir, scope, frozen=True)


def gc_paused(command: F) -> F:
    """The command runs with the garbage collector paused (api.runs.collection_paused): a diff,
    the checks or a page of 20,000 hosts make millions of objects and next to no garbage."""
    return collection_paused()(command)


def run_file(ref: str | Path, runs_dir: Path | None = None, scope: str | None = None) -> Path:
    """The file of a saved run (api.resolve_run): a run named that does not exist is said now."""
    return api.resolve_run(ref, runs_dir, scope)


def resolve_and_load(
    ref: str | Path, runs_dir: Path | None = None, scope: str | None = None
) -> tuple[Path, Run]:
    """The file of a saved run and the run (api.load_run, frozen: the command works on it until
    it exits): for a command that names the file."""
    path = run_file(ref, runs_dir, scope)
    return path, api.load_run(path, frozen=True)


def together(*decorators: Callable[[Any], Any]) -> Callable[[F], F]:
    """Several options as one decorator, in the order written (as stacked above a function)."""

    def decorate(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return decorate


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
workers_option = click.option(
    "--workers",
    type=click.IntRange(1, 4096),
    default=None,
    metavar="N",
    help="Controller processes the SSH hosts are spread over, each with its own connections "
    "(default: one per core, fewer for a small fleet: 64 hosts or more each; 1: every host in "
    "this process).",
)
probe_dir_option = click.option(
    "--probe-dir",
    "probe_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A folder of your own probes (repeatable; also $FLEET_PROBE_DIR, ':'-separated).",
)

# ------------------------------------------------------------------- what becomes of a run

runs_dir_option = click.option(
    "--runs-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where runs are saved (default ~/.local/state/fleet/runs).",
)
json_option = click.option(
    "--json",
    "json_path",
    metavar="FILE",
    help="Write the command's JSON document here ('-' for stdout): probe and fabric the run "
    "(fleet.run), check its verdicts (fleet.check).",
)


def document_option(what: str) -> Callable[[F], F]:
    """--json FILE: the command's JSON document (`what`), '-' for stdout; the same flag in
    every command (probe and fabric: json_option, the run)."""
    return click.option(
        "--json", "json_path", metavar="FILE", help=f"Write {what} here ('-' for stdout)."
    )


def say_written(path: Path) -> None:
    """Each file a command writes is said in one line on stderr: `wrote run.json (12 KiB)`."""
    click.echo(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)", err=True)


def write_json(document: Any, json_path: str) -> bool:
    """The document as indented JSON, a piece at a time: on stdout for '-', else to the file
    (said on stderr). False, said on stderr, when the file cannot be written (exit bit 64,
    EXIT_NOT_KEPT, as for a run's --json)."""
    if json_path == "-":
        write_indented(document, sys.stdout.write)
        sys.stdout.flush()
        return True
    target = Path(json_path)
    try:
        with target.open("w", encoding="utf-8") as out:
            write_indented(document, out.write)
    except OSError as exc:
        click.echo(stderr_text(f"error: cannot write {json_path}: {exc.strerror}"), err=True)
        return False
    say_written(target)
    return True


def json_from_format(output_format: str, json_path: str | None) -> tuple[str, str | None]:
    """`--format json`, the spelling of `--json -` until this release: still honoured, with a
    deprecation message on stderr. Returns the format left to print and --json's target."""
    if output_format != "json":
        return output_format, json_path
    click.echo("warning: --format json is deprecated: write --json - (or --json FILE)", err=True)
    if json_path not in (None, "-"):
        raise UsageError(
            "--format json (deprecated) and --json FILE: give one", hint="--json - for stdout"
        )
    return "terminal", "-"


no_save_option = click.option(
    "--no-save", is_flag=True, help="Do not save the run in the runs folder."
)
accept_new_option = click.option(
    "--accept-new",
    is_flag=True,
    help="Record unknown host keys in fleet's own known_hosts (changed keys: never).",
)

# ------------------------------------------------------------------------- saved runs

run_argument = click.argument(
    "run_ref", metavar="RUN", default="latest", shell_complete=complete_runs
)
scope_option = click.option(
    "-i",
    "--inventory",
    "scope",
    metavar="INVENTORY",
    help="latest/previous count only this inventory's runs (path, file name or name; "
    "or write latest:NAME).",
)


def format_option(
    choices: Sequence[str] = ("terminal", "json", "markdown"), help: str = "How to print the diff."
) -> Callable[[F], F]:
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(list(choices)),
        default="terminal",
        show_default=True,
        help=help,
    )


def baseline_option(help: str) -> Callable[[F], F]:
    return click.option("--baseline", metavar="RUN", shell_complete=complete_runs, help=help)


def baseline_file_option(
    *names: str,
    help: str = "Judge each host's measurements against the bands of its cohort in this "
    "baseline file (made by `fleet baseline`).",
) -> Callable[[F], F]:
    """A baseline file (fleet.baseline/1); `--baseline RUN` above is a saved run to drift from."""
    return click.option(
        *names, "baseline_file", metavar="FILE", type=click.Path(dir_okay=False), help=help
    )


# ------------------------------------------------------------------ measuring and judging


def timeout_option(default: float, most: float, help: str) -> Callable[[F], F]:
    return click.option(
        "-t",
        "--timeout",
        "timeout_s",
        type=click.FloatRange(5, most),
        default=default,
        show_default=True,
        help=help,
    )


def tolerance_option(
    default: float = DEFAULT_TOLERANCE,
    help: str = "Relative tolerance for measurements (allreduce latency, busbw) against the "
    "cohort median.",
) -> Callable[[F], F]:
    return click.option(
        "--tolerance",
        type=click.FloatRange(0.01, 100),
        default=default,
        show_default=True,
        help=help,
    )


gpubench_option = click.option(
    "--gpubench",
    is_flag=True,
    help="Also run the opt-in gpubench probe: every GPU's matmul, memory and host-copy speed and "
    "every GPU pair's peer copies, all at once, scored against the best on the host "
    "(about 30 s; per-host timeout at least 180 s).",
)


def rules_option(help: str) -> Callable[[F], F]:
    return click.option(
        "--rules", "rules_files", multiple=True, type=click.Path(dir_okay=False), help=help
    )


def pack_option(help: str) -> Callable[[F], F]:
    return click.option("--pack", "packs", multiple=True, help=help)


# ---------------------------------------------------------------------------------- Slurm


def slurm_target_option(
    help: str = "Reach Slurm nodes through srun: partition=NAME, nodes=NODESET or job=ID.",
) -> Callable[[F], F]:
    return click.option("--slurm", "slurm_target", metavar="TARGET", help=help)


# The hosts of a Slurm cluster (probe, check, fabric): the target, site options, GPUs.
slurm_options = together(
    slurm_target_option(),
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

cohort_by_option = click.option(
    "--cohort-by",
    metavar="EXPR",
    help="JMESPath over each host's facts naming its cohort, e.g. gpu.gpus[0].name "
    "(default: the inventory's cohort_by, else GPU model x count x interconnect).",
)
between_option = click.option(
    "--between",
    is_flag=True,
    help="Also list the hardware facts that differ between cohorts (summarised by default).",
)

fail_on_option = click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "info"]),
    help="Also set exit bit 32 when a finding at least this severe is said (CI's choice; "
    "default: findings never change the exit code of probe, show or diff).",
)


# ------------------------------------------------- the probes' own options, from their units
# (fleet/units/PROBE/probe.py, OPTIONS): a command that probes is a ProbingCommand, which offers
# every unit's options, those of a unit registered after fleet.cli was imported included.


@functools.cache
def click_option(option: Any) -> click.Option:
    """The click option for one declared probe option (a fleet.registry.options.ProbeOption, as
    api.ProbeOptions.command_line() gives them); its value arrives as `option.key`."""
    common = {"help": option.help, "metavar": option.metavar, "default": option.default}
    if option.kind == "switch":
        return click.Option([option.flag, option.key], show_default=True, **common)
    if option.kind == "flag":
        return click.Option([option.flag, option.key], is_flag=True, **common)
    if option.kind == "repeat":
        return click.Option([option.flag, option.key], multiple=True, **common)
    return click.Option([option.flag, option.key], type=click.FloatRange(*option.bounds), **common)


def unit_option_keys() -> set[str]:
    return {option.key for option in api.ProbeOptions.command_line()}


class ProbingCommand(click.Command):
    """A command whose parameters include every unit's probe options, asked for each time the
    command line is read (help, parsing, completion), so that a unit registered late counts."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        have = {param.name for param in params}
        extra: list[click.Parameter] = [
            click_option(option)
            for option in api.ProbeOptions.command_line()
            if option.key not in have
        ]
        return params[:-1] + extra + params[-1:] if params else extra  # --help stays last
