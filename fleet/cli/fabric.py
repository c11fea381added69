"""`fleet fabric`: cross-host allreduce rounds from the controller, to find the bad host or link.

Exit code: 4 some host not reached or unable to run a rank (no torch, no GPU), 8 some group failed
or summed wrongly (isolate: a suspect named), 64 the run was not kept, 130 interrupted.

fleet.cli.root loads this module on the first use of `fleet fabric` (FleetGroup.LAZY).
"""

from __future__ import annotations

import asyncio
import functools
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from fleet import api
from fleet.api.fabric_runs import FabricEvents, fabric_and_keep, fabric_settings
from fleet.cli.options import (
    accept_new_option,
    inventory_option,
    json_option,
    limit_option,
    no_save_option,
    runs_dir_option,
    slurm_options,
    timeout_option,
    tolerance_option,
)
from fleet.cli.probing import json_file, say_kept
from fleet.cli.selection import HostChoice, selection_options, srun_options
from fleet.errors import UsageError
from fleet.exits import fabric_exit_code, kept_bits, with_bits
from fleet.render.terminal.console import make_console
from fleet.render.terminal.fabric import render_fabric

if TYPE_CHECKING:
    from fleet.api.fabric_runs import FabricSettings, GroupResult

ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_", "NVSHMEM_")


class ProgressLines(FabricEvents):
    """One line per finished group on stderr: rounds take seconds, users want to see them."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def group_finished(self, result: GroupResult) -> None:
        what = f"{result.busbw_gbps:.3g} GB/s" if result.busbw_gbps is not None else result.error
        what = escape(str(what))
        self.console.print(
            f"[dim]round {result.round}[/] {escape(' ↔ '.join(result.hosts))}  "
            f"{result.status}  {what}",
            highlight=False,
        )


def parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith(ENV_PREFIXES):
            raise UsageError(
                f"--env {item!r} is not KEY=VALUE with a NCCL_/GLOO_/TORCH_/CUDA_ key",
                hint="e.g. --env NCCL_SOCKET_IFNAME=eth0",
            )
        env[key] = value
    return env


@click.command("fabric")
@inventory_option
@limit_option
@selection_options
@slurm_options
@click.option(
    "--backend",
    type=click.Choice(["nccl", "gloo"]),
    default="nccl",
    show_default=True,
    help="nccl: one rank per GPU; gloo: one rank per host, on CPU.",
)
@click.option(
    "--pairs",
    "pair_mode",
    default="one",
    show_default=True,
    help="Pair rounds: one (disjoint pairs covering every host), ring, all, random:K, or "
    "isolate (adaptive: screen groups of about √N, bisect the bad ones, confirm suspects).",
)
@click.option(
    "--expect-busbw",
    "floor_gbps",
    type=click.FloatRange(min=0, min_open=True),
    help="isolate: the busbw (GB/s) a group must reach, e.g. the cohort's baseline band's low "
    "end (default: this run's median over 1 + tolerance).",
)
@click.option(
    "--group/--no-group",
    "full_group",
    default=True,
    show_default=True,
    help="Also run the full group (every host at once) after the pairs.",
)
@click.option(
    "--sizes",
    help="Message sizes, e.g. 8,64K,1M,256M (default: nccl 8 B…256 MiB, gloo 8 B…16 MiB).",
)
@timeout_option(120, 3600, "Seconds per round (each rank's own deadline too).")
@click.option(
    "--join-timeout",
    type=click.FloatRange(1, 600),
    default=30,
    show_default=True,
    help="Seconds the ranks wait for each other at the rendezvous.",
)
@tolerance_option(fabric_settings().tolerance, "A pair slower than median/(1+tolerance) is bad.")
@click.option("--seed", type=int, help="Seed for random pairs and ports (reproducible rounds).")
@click.option(
    "--master-port",
    "first_port",
    type=click.IntRange(1024, 65535),
    help="First rendezvous port to try (default: random in 29500-32767, below the ephemeral ports).",
)
@click.option(
    "--env",
    "env_items",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set an NCCL_/GLOO_/TORCH_/CUDA_ variable for the ranks (repeatable).",
)
@json_option
@runs_dir_option
@no_save_option
@accept_new_option
def fabric_command(
    inventory_path: str | None,
    limit: str | None,
    json_path: str | None,
    runs_dir: Path | None,
    no_save: bool,
    accept_new: bool,
    slurm_target: str | None,
    slurm_args: str | None,
    slurm_gpus: str,
    **options: Any,
) -> None:
    """Allreduce between hosts, in pairs and all together; name the slow host or link."""
    choice = HostChoice.pop_from(options)  # what is left: how the rounds run
    settings = rounds_settings(**options)  # bad words fail before the inventory is read
    selection = choice.select(inventory_path, limit, slurm=slurm_target)
    start = functools.partial(
        fabric_and_keep,
        selection,
        settings,
        accept_new=accept_new,
        events=ProgressLines(make_console(stderr=True)),
        slurm_args=srun_options(slurm_args),
        slurm_gpus=slurm_gpus,
        save=not no_save,
        runs_dir=runs_dir,
        json_path=json_file(json_path),
    )
    kept = asyncio.run(with_signals(start))
    sys.exit(show_fabric(kept, json_path, [h.name for h in selection.hosts]))


def rounds_settings(
    backend: str,
    pair_mode: str,
    floor_gbps: float | None,
    full_group: bool,
    sizes: str | None,
    timeout_s: float,
    join_timeout: float,
    tolerance: float,
    seed: int | None,
    first_port: int | None,
    env_items: tuple[str, ...],
) -> FabricSettings:
    """The rounds' settings from fabric's options (api.fabric_settings reads --pairs, --sizes)."""
    return fabric_settings(
        backend=backend,
        pairs=pair_mode,
        full_group=full_group,
        sizes=sizes,
        round_timeout_s=timeout_s,
        join_timeout_s=min(join_timeout, timeout_s),
        tolerance=tolerance,
        floor_gbps=floor_gbps,
        seed=seed,
        first_port=first_port,
        env=parse_env(env_items),
    )


def show_fabric(kept: api.KeptRun, json_path: str | None, hosts: list[str]) -> int:
    """What was kept, the pairs and suspects, where the run was saved; the exit code."""
    console = make_console(stderr=json_path == "-")
    say_kept(kept.errors, kept.run, json_path, kept.written)
    assert kept.run.fabric is not None
    render_fabric(console, kept.run.fabric, hosts)
    if kept.saved:
        console.print(f"[dim]saved {kept.saved}")
    return with_bits(fabric_exit_code(kept.run), kept_bits(kept.kept))


T = TypeVar("T")


async def with_signals(start: Callable[..., Awaitable[T]]) -> T:
    """Ctrl-C (or SIGTERM) cancels the running round (its ranks are stopped) and skips the rest."""
    interrupt = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, interrupt.set)
    loop.add_signal_handler(signal.SIGTERM, interrupt.set)
    try:
        return await start(interrupt=interrupt)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
        if interrupt.is_set():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
