"""Which hosts a command reaches: an inventory (fleet YAML or Ansible), a nodeset (-H), a Slurm
target's nodes, or this machine; narrowed by --limit, with ~/.ssh/config applied."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.errors import InventoryError, UsageError
from fleet.inventory import Inventory, local_inventory
from fleet.inventory.adhoc import AdhocSettings, adhoc_inventory
from fleet.inventory.document import hosts_document
from fleet.inventory.resolve import check_identity_files, resolve_hosts
from fleet.inventory.sources import FORMATS, load_any_inventory
from fleet.models import Host

if TYPE_CHECKING:  # Slurm's modules load only when --slurm is given
    from fleet.inventory.slurm import SlurmCluster, SlurmNode


def __getattr__(name: str) -> Any:
    """SlurmNode (the type of Selection.slurm's nodes), loaded with Slurm's modules when asked."""
    if name == "SlurmNode":
        from fleet.inventory.slurm import SlurmNode

        return SlurmNode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


INVENTORY_FORMATS: tuple[str, ...] = tuple(FORMATS)  # what an inventory file may be (or "auto")

__all__ = [
    "INVENTORY_FORMATS",
    "AdhocSettings",
    "Inventory",
    "Selection",
    "SlurmNode",
    "hosts_document",
    "inventory_probe_args",
    "open_inventory",
    "select_hosts",
    "slurm_argv",
]


@dataclass(frozen=True)
class Selection:
    """The hosts a command will reach, and where they were described (for the run document)."""

    hosts: list[Host]
    source: str | None
    warnings: tuple[str, ...] = ()  # e.g. ssh_config keywords fleet ignores, one line each
    slurm: SlurmCluster | None = None  # --slurm: the nodes, their states, the job
    cohort_by: str | None = None  # the inventory's cohort_by, recorded in the run
    limit: str | None = None  # the --limit that narrowed the hosts, recorded in the run


def select_hosts(
    inventory: str | Path | None = None,
    limit: str | None = None,
    *,
    hosts: str | None = None,
    slurm: str | None = None,
    ssh_config: str | None = None,
    inventory_format: str = "auto",
    adhoc: AdhocSettings | None = None,
    require_files: bool = True,
    ssh_exec: bool = True,
) -> Selection:
    """The hosts to reach, narrowed by `limit` (--limit syntax): those of `inventory` (fleet YAML
    or Ansible), or those the nodeset `hosts` names (-H), or a Slurm target's nodes (`slurm`:
    `partition=NAME`, `nodes=NODESET`, `job=ID`; `adhoc.python` is their interpreter), or else
    this machine. `ssh_config`: a path,
    "none", or None for ~/.ssh/config when it exists; inventory values win over it. `ssh_exec`
    False (or `ssh_exec: false` in the inventory): run no `Match exec` command, refuse the hosts
    that depend on one. A missing
    local identity_file is an InventoryError (a warning when not `require_files`)."""
    if slurm is not None:
        python = adhoc.python if adhoc else None  # --python: the nodes' interpreter
        return _select_slurm_nodes(slurm, limit, inventory or hosts, python)
    loaded = open_inventory(inventory, hosts, inventory_format, adhoc)
    config = None
    if any(host.transport == "ssh" for host in loaded.hosts.values()):
        # only SSH hosts read it: this machine alone reads no ~/.ssh/config (nor imports its reader)
        from fleet.inventory.openssh import OpenSsh

        config = OpenSsh.open(ssh_config, run_exec=ssh_exec and loaded.ssh_exec)
    resolved = resolve_hosts(loaded, config)
    chosen = resolved.select(limit)
    if not chosen:
        raise UsageError("no host selected", hint="check --limit against `fleet hosts`")
    warnings = list(config.warnings) if config else []
    try:
        check_identity_files(chosen)
    except InventoryError as exc:
        if require_files:
            raise
        warnings.append(exc.message)
    return Selection(
        chosen, resolved.path, tuple(warnings), cohort_by=resolved.cohort_by, limit=limit or None
    )


def _select_slurm_nodes(
    target: str, limit: str | None, other: object, python: str | None = None
) -> Selection:
    if other:
        raise UsageError("--slurm and -i/-H both name the hosts", hint="use one of them")
    from fleet.inventory.slurm import discover, parse_target

    cluster = discover(parse_target(target))
    loaded = cluster.inventory(python or "python3")
    hosts = loaded.select(limit)
    if not hosts:
        raise UsageError("no host selected", hint="check --limit against the Slurm nodes")
    return Selection(hosts, loaded.path, slurm=cluster, limit=limit or None)


def open_inventory(
    inventory: str | Path | None,
    hosts: str | None = None,
    inventory_format: str = "auto",
    adhoc: AdhocSettings | None = None,
) -> Inventory:
    """The inventory as written (before ~/.ssh/config): the file's, the nodeset's, or this
    machine's."""
    if hosts is not None and inventory is not None:
        raise UsageError(
            "-H and -i name hosts two ways: give one",
            hint="to pick hosts of an inventory, use -i FILE --limit NODESET",
        )
    if hosts is not None:
        return adhoc_inventory(hosts, adhoc)
    if adhoc is not None and adhoc.given():
        flags = ", ".join(adhoc.flags())
        raise UsageError(
            f"{flags} set(s) the hosts of -H only",
            hint="with -i, write these settings in the inventory",
        )
    return load_any_inventory(str(inventory), inventory_format) if inventory else local_inventory()


def inventory_probe_args(
    inventory: str | Path | None, inventory_format: str = "auto"
) -> dict[str, Mapping[str, Any]]:
    """Each host's probe_args in `inventory` (e.g. gpu.expected_count; rules read them as
    `_args`); none without an inventory."""
    if inventory is None:
        return {}
    loaded = open_inventory(inventory, None, inventory_format)
    return {name: host.probe_args for name, host in loaded.hosts.items()}


def slurm_argv(text: str | None) -> tuple[str, ...]:
    """srun options written as one shell-quoted string (`--slurm-args`) as argv items; Slurm's
    modules load only when there is some. UsageError when the quoting is broken."""
    if not text:
        return ()
    from fleet.transport.slurm import parse_slurm_args

    return parse_slurm_args(text)
