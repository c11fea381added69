"""`fleet hosts` and `fleet probes`: what a command would reach and carry. Contacts nothing."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from fleet import api
from fleet.cli.options import inventory_option, limit_option, probe_dir_option, write_json
from fleet.cli.options import slurm_target_option as slurm_option
from fleet.cli.selection import HostChoice, origin_summary, selection_options
from fleet.exits import EXIT_NOT_KEPT
from fleet.render.terminal.console import make_console
from fleet.render.terminal.tables import Column, print_table

if TYPE_CHECKING:
    from fleet.api.hosts import SlurmNode
    from fleet.models import Host


BARE_JSON = "\0bare"  # what click hands over for `--json` given no FILE


@click.command()
@inventory_option
@limit_option
@selection_options
@slurm_option(
    "A Slurm partition's, nodeset's or job's nodes, with their Slurm state "
    "(asks Slurm's controller; contacts no node)."
)
@click.option(
    "--json",
    "json_path",
    metavar="FILE",
    is_flag=False,
    flag_value=BARE_JSON,  # `--json` alone: the flag it was until this release
    help="Write the hosts as a JSON document here (fleet.hosts/1; '-' for stdout).",
)
def hosts(
    inventory_path: str | None,
    limit: str | None,
    slurm_target: str | None,
    json_path: str | None = None,
    **choice: Any,
) -> None:
    """Print the selected hosts, their resolved settings and where each came from. Contacts nothing."""
    if json_path == BARE_JSON:
        click.echo(
            "warning: fleet hosts --json without FILE is deprecated: write --json -", err=True
        )
        json_path = "-"
    selection = HostChoice.pop_from(choice).select(
        inventory_path, limit, require_files=False, slurm=slurm_target
    )
    if json_path is not None and not write_json(api.hosts_document(selection), json_path):
        sys.exit(EXIT_NOT_KEPT)
    if json_path == "-":
        return
    states = {n.name: n for n in selection.slurm.nodes} if selection.slurm else {}
    rows = [
        (h.name, h.transport, h.target(), h.python,
         h.jump or ("proxy: " + " ".join(h.proxy_command) if h.proxy_command else ""),
         identity_shown(h),
         ",".join(h.groups), ", ".join(h.probe_args),
         slurm_state(states[h.name]) if h.name in states
         else f"REFUSED: {h.refused.splitlines()[0]}" if h.refused else origin_summary(h))
        for h in selection.hosts
    ]  # fmt: skip
    print_table(make_console(), str(selection.source), HOSTS_COLUMNS, rows)


def identity_shown(host: Host) -> str:
    """The key ssh would offer first: the first IdentityFile that exists; else the first named,
    kept as `ssh -G` prints it (`C:\\Users\\x\\key.pem`, opened relative to the working
    folder), said missing."""
    if host.identity_file or not host.identity_files:
        return host.identity_file or ""
    return f"{host.identity_files[0]} (missing)"


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


@click.command("probes")
@probe_dir_option
def list_probes(probe_dirs: tuple[str, ...]) -> None:
    """List the probes a bundle can carry: fleet's own and yours (one that cannot be used: why)."""
    for name, probe in api.available_probes(probe_dirs).items():
        click.echo(f"{name:12} {f'✗ {probe.problem}' if probe.problem else probe.summary}")
