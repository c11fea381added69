"""`fleet fabric` as a Run: cross-host allreduce rounds (fleet.fabric), over the same transports
as probing, and the types its callers need (FabricSettings, FabricEvents, GroupResult). This
module loads on first use of a fabric name, not when fleet is imported."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.api.hosts import select_hosts
from fleet.api.probing import transports_for
from fleet.api.runs import assemble_run
from fleet.fabric.results import GroupResult
from fleet.fabric.run import FabricEvents, FabricSettings
from fleet.models import Host, Run, now

if TYPE_CHECKING:
    from fleet.api.hosts import Selection
    from fleet.api.runs import KeptRun
    from fleet.fabric.plan import PairSpec
    from fleet.fabric.run import LaunchTogether
    from fleet.inventory.slurm import SlurmCluster

__all__ = [
    "FabricEvents",
    "FabricSettings",
    "GroupResult",
    "fabric",
    "fabric_and_keep",
    "fabric_async",
    "fabric_settings",
    "parse_pairs",
    "parse_sizes",
]


def fabric(
    inventory: str | Path | None = None,
    limit: str | None = None,
    *,
    hosts: str | None = None,
    slurm: str | None = None,
    settings: FabricSettings | None = None,
    accept_new: bool = False,
    slurm_args: Sequence[str] = (),
    slurm_gpus: str = "exclusive",
    events: FabricEvents | None = None,
) -> Run:
    """Allreduce between the selected hosts (chosen as for probe), in pairs and all together;
    the Run's `fabric` section names the slow host or link. `settings`: FabricSettings (backend,
    pairs, sizes, timeouts, tolerance; the defaults without)."""
    selection = select_hosts(inventory, limit, hosts=hosts, slurm=slurm)
    return asyncio.run(
        fabric_async(
            selection.hosts,
            settings or FabricSettings(),
            inventory=selection.source,
            accept_new=accept_new,
            events=events,
            slurm=selection.slurm,
            slurm_args=slurm_args,
            slurm_gpus=slurm_gpus,
        )
    )


async def fabric_async(
    hosts: Sequence[Host],
    settings: FabricSettings,
    *,
    inventory: str | None = None,
    accept_new: bool = False,
    events: FabricEvents | None = None,
    interrupt: asyncio.Event | None = None,
    slurm: SlurmCluster | None = None,
    slurm_args: Sequence[str] = (),
    slurm_gpus: str = "exclusive",
) -> Run:
    """`fleet fabric` as a Run: cross-host allreduce rounds over `hosts` (see fleet.fabric), one
    `fabric` result per host and the run's `fabric` section (pairs, ring, suspects). `slurm`
    (Selection.slurm): the hosts are that cluster's nodes, each group launched by its own srun.
    Setting `interrupt` cancels the running round and skips the rest."""
    from fleet.fabric import launch
    from fleet.fabric.run import FabricRounds

    started = now()
    together = slurm_steps(slurm, settings, slurm_args, slurm_gpus) if slurm else None
    async with transports_for(hosts, accept_new) as transports:
        rounds = FabricRounds(transports, settings, events, interrupt, together)
        outcome = await rounds.run(hosts)
    return assemble_run(
        started,
        hosts,
        outcome.outcomes,
        bundle_sha256=launch.code_sha256(),
        probes=("fabric",),
        inventory=inventory,
        interrupted=outcome.interrupted,
        slurm=slurm_nodes_record(slurm) if slurm else None,
        fabric=outcome.section,
    )


def slurm_steps(
    cluster: SlurmCluster, settings: FabricSettings, slurm_args: Sequence[str], slurm_gpus: str
) -> LaunchTogether:
    """Fabric over Slurm: the discovery and each group (a pair, the full group) is its own srun
    step over exactly its nodes (in job=ID: --jobid --overlap), so groups run side by side; a
    node Slurm calls unusable is never launched on (its groups are skipped with Slurm's reason)."""
    from fleet.fabric.run import CONTROLLER_SLACK_S, DISCOVER_TIMEOUT_S
    from fleet.transport.slurm import SlurmOptions, SlurmTransport, gpu_request

    deadline = max(settings.round_timeout_s, DISCOVER_TIMEOUT_S) + CONTROLLER_SLACK_S
    options = SlurmOptions(gpus=slurm_gpus, extra_args=tuple(slurm_args), deadline_s=deadline)
    gpu_request(options.gpus, cluster.job_id is not None)  # a bad --slurm-gpus fails now
    return lambda hosts: SlurmTransport(cluster, hosts, options)


def slurm_nodes_record(cluster: SlurmCluster) -> dict[str, Any]:
    """The run document's `slurm` for a run of many steps: the target, the job, each node's state."""
    return {
        "target": str(cluster.target),
        "job_id": cluster.job_id,
        "usable": sum(1 for n in cluster.nodes if n.usable),
        "unavailable": sum(1 for n in cluster.nodes if not n.usable),
        "nodes": {n.name: n.record() for n in cluster.nodes},
    }


def parse_pairs(text: str) -> PairSpec:
    """Which pair rounds (`--pairs`): one, ring, all or random:K; UsageError otherwise."""
    from fleet.fabric.plan import parse_pairs as parse

    return parse(text)


def parse_sizes(text: str) -> tuple[int, ...]:
    """Message sizes (`--sizes`), e.g. "8,64K,1M,256M", in bytes; UsageError when unreadable."""
    from fleet.fabric.plan import parse_sizes as parse

    return parse(text)


def fabric_settings(pairs: str = "one", sizes: str | None = None, **fields: Any) -> FabricSettings:
    """FabricSettings from the words a user types: `pairs` (--pairs: one, ring, all, random:K,
    isolate), `sizes` (--sizes, e.g. 8,64K,1M); the other fields as FabricSettings takes them.
    UsageError for words it cannot read."""
    return FabricSettings(
        pairs=parse_pairs(pairs), sizes=parse_sizes(sizes) if sizes else (), **fields
    )


async def fabric_and_keep(
    selection: Selection,
    settings: FabricSettings,
    *,
    accept_new: bool = False,
    events: FabricEvents | None = None,
    interrupt: asyncio.Event | None = None,
    slurm_args: Sequence[str] = (),
    slurm_gpus: str = "exclusive",
    save: bool = True,
    runs_dir: str | Path | None = None,
    json_path: str | Path | None = None,
) -> KeptRun:
    """`fleet fabric`: fabric_async over `selection`, then keep_run (saved, its document to
    `json_path`; what could not be kept is in KeptRun.errors, never raised)."""
    from fleet.api.runs import keep_run

    run = await fabric_async(
        selection.hosts,
        settings,
        inventory=selection.source,
        accept_new=accept_new,
        events=events,
        interrupt=interrupt,
        slurm=selection.slurm,
        slurm_args=slurm_args,
        slurm_gpus=slurm_gpus,
    )
    return keep_run(run, save=save, runs_dir=runs_dir, json_path=json_path)
