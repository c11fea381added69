"""Shell completion beyond click's own: probe names, saved runs, and an inventory's hosts and groups.

Enable it once per shell (click's mechanism; see docs/using.md, "Shell completion"):
    eval "$(_FLEET_COMPLETE=bash_source fleet)"     # zsh: zsh_source, fish: fish_source

Completion must never fail loudly or contact anything: every function here returns [] when it
cannot tell (a bad inventory, no runs folder).
"""

from __future__ import annotations

import click
from click.shell_completion import CompletionItem

from fleet import api
from fleet.api.hosts import open_inventory
from fleet.errors import FleetError

RUN_ALIASES = ("latest", "previous")


def complete_probes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """`-p system,gp<TAB>` → `system,gpu`: the last comma-separated name is completed."""
    done, _, partial = incomplete.rpartition(",")
    prefix = f"{done}," if done else ""
    try:
        names = api.available_probes(ctx.params.get("probe_dirs") or ())
    except FleetError:
        return []
    chosen = set(done.split(","))
    return [prefix + n for n in names if n.startswith(partial) and n not in chosen]


def complete_runs(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """latest and previous, then the saved runs' names, newest first."""
    runs = [p.stem for p in reversed(api.saved_runs(ctx.params.get("runs_dir")).paths)]
    items = [CompletionItem(a, help="a saved run") for a in RUN_ALIASES]
    items += [CompletionItem(name) for name in runs]
    return [item for item in items if str(item.value).startswith(incomplete)]


def complete_hosts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Hosts and groups of the inventory given with -i (this machine's without), for --limit."""
    try:
        inventory = open_inventory(ctx.params.get("inventory_path"))
    except FleetError:
        return []
    done, _, partial = incomplete.rpartition(",")
    prefix = f"{done}," if done else ""
    bang = "!" if partial.startswith("!") else ""
    names = [*inventory.groups, *inventory.hosts]
    return [prefix + bang + n for n in names if n.startswith(partial.lstrip("!"))]
