"""Probing: the bundle of probes built, run on every selected host at once, and the Run it makes;
probe_and_keep adds saving it and writing its JSON, as `fleet probe` does."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.api.hosts import Selection, select_hosts
from fleet.api.runs import KeptRun, keep_run
from fleet.execution.bundle import Bundle, available_probes, build_bundle
from fleet.execution.fanout import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT_S,
    Events,
    FanOut,
    RunSettings,
)
from fleet.execution.workers import SshTransports, WorkerFanOut, spread, worker_count
from fleet.models import OPT_IN_PROBES, Host, HostOutcome, Run
from fleet.store import default_state_dir
from fleet.transport import LocalTransport, Transport
from fleet.transport.unsupported import PREFIX as UNSUPPORTED
from fleet.transport.unsupported import UnsupportedTransport
from fleet.version import __version__

if TYPE_CHECKING:  # loaded only when asked for
    from fleet.transport.slurm import SlurmTransport

MATRIX_TIMEOUT_S = 300.0  # per host, with --allreduce-matrix (30 s sweep + 60 s matrix + the rest)
GPUBENCH_TIMEOUT_S = 180.0  # per host, with gpubench (its 30 s budget after the allreduce's 30 s)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_TIMEOUT_S",
    "Bundle",
    "Events",
    "ProbeOptions",
    "available_probes",
    "build_probe_bundle",
    "probe",
    "probe_and_keep",
    "probe_and_keep_async",
    "probe_args_from",
    "probe_async",
]


@dataclass(frozen=True)
class ProbeOptions:
    """How to probe: which probes, their options, and the fan-out's limits."""

    probes: Sequence[str] | None = None  # None: every probe
    allreduce: bool = True  # False drops the allreduce probe (the slow one) from the default set
    quick: bool = False
    allreduce_matrix: bool = False  # the allreduce probe also runs its matrix (which variant wins)
    gpubench: bool = False  # add the opt-in gpubench probe (per-GPU and per-pair speed)
    imports: Sequence[str] = ()  # import specs for the imports probe, e.g. "mod:Name|AltName"
    dir_modules: Sequence[str] = ()  # modules whose dir() the dir probe dumps
    concurrency: int | None = DEFAULT_CONCURRENCY  # caps handshakes and sessions; None: no cap
    timeout_s: float = DEFAULT_TIMEOUT_S
    accept_new: bool = False  # record unknown host keys in fleet's own known_hosts
    probe_dirs: Sequence[str | Path] = ()  # folders of your own probes (also $FLEET_PROBE_DIR)
    extra_probe_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # the health probe reads its error counters twice, this many seconds apart (--sample)
    health_sample_s: float | None = None
    slurm_args: Sequence[str] = ()  # srun options a site needs: account, QoS, reservation, gres
    slurm_gpus: str = "exclusive"  # how srun asks for the nodes' GPUs: exclusive | none | N
    # told of each host key --accept-new records, one line: host, fingerprint, file
    on_key_recorded: Callable[[str], None] | None = None
    # worker processes the SSH hosts are spread over (fleet/execution/workers.py); None: one per
    # core, fewer for a small fleet; 1: every host in this process
    workers: int | None = None

    @property
    def host_timeout_s(self) -> float:
        """The matrix adds up to a minute and a half to the allreduce probe, gpubench its own
        budget: room for them."""
        timeout = max(self.timeout_s, MATRIX_TIMEOUT_S) if self.allreduce_matrix else self.timeout_s
        return max(timeout, GPUBENCH_TIMEOUT_S) if self.gpubench else timeout


def build_probe_bundle(options: ProbeOptions) -> Bundle:
    """The probes to ship: `options.probes` (default all but the opt-in ones, OPT_IN_PROBES),
    without allreduce when it is off, with gpubench when asked for. Raises UsageError for an
    unknown probe name, before any host is contacted."""
    names = list(options.probes) if options.probes else None
    without = [] if options.allreduce or options.allreduce_matrix else ["allreduce"]
    if names is None:  # every probe but the opt-in ones not asked for
        without += [p for p in OPT_IN_PROBES if not (p == "gpubench" and options.gpubench)]
    elif options.gpubench and "gpubench" not in names:
        names.append("gpubench")
    return build_bundle(names, options.probe_dirs, without)


def probe_args_from(options: ProbeOptions) -> dict[str, dict[str, Any]]:
    """Options as per-probe arguments; they override the inventory's probe_args."""
    args: dict[str, dict[str, Any]] = {k: dict(v) for k, v in options.extra_probe_args.items()}
    if options.health_sample_s:
        args.setdefault("health", {}).update(health_sample_args(options.health_sample_s))
    if options.imports:
        args.setdefault("imports", {})["specs"] = list(options.imports)
    if options.dir_modules:
        args.setdefault("dir", {})["modules"] = list(options.dir_modules)
    if options.quick:
        args.setdefault("allreduce", {})["quick"] = True
    if options.quick and (options.gpubench or "gpubench" in (options.probes or ())):
        args.setdefault("gpubench", {})["quick"] = True
    if options.allreduce_matrix:
        args.setdefault("allreduce", {})["matrix"] = True
    return args


# The health probe's own deadline (its TIMEOUT_S) leaves room for a sample this long; a longer
# one raises the probe's timeout with it.
HEALTH_SAMPLE_ROOM_S = 15.0


def health_sample_args(sample_s: float) -> dict[str, Any]:
    """A sample of `sample_s` seconds as the health probe's arguments."""
    args: dict[str, Any] = {"sample_s": sample_s}
    if sample_s > HEALTH_SAMPLE_ROOM_S:
        args["timeout_s"] = sample_s + 2 * HEALTH_SAMPLE_ROOM_S
    return args


def probe(
    inventory: str | Path | None = None,
    limit: str | None = None,
    probes: Sequence[str] | None = None,
    *,
    hosts: str | None = None,
    slurm: str | None = None,
    options: ProbeOptions | None = None,
) -> Run:
    """Probe the selected hosts and return the Run (not saved: see save_run, probe_and_keep).

    The hosts: an `inventory` file (fleet YAML or Ansible), a nodeset (`hosts="gpu[01-08]"`, as
    -H), or a Slurm target (`slurm="partition=gpu"`); this machine when none is given. `options`:
    how to probe (ProbeOptions: allreduce, quick, timeout_s, concurrency, accept_new, …);
    `probes`, when given, wins over options.probes. Raises FleetError for bad input before any
    host is contacted."""
    chosen = _with_probes(options or ProbeOptions(), probes)
    selection = select_hosts(inventory, limit, hosts=hosts, slurm=slurm)
    bundle = build_probe_bundle(chosen)
    return asyncio.run(probe_async(selection, bundle, chosen))


def _with_probes(options: ProbeOptions, probes: Sequence[str] | None) -> ProbeOptions:
    return options if probes is None else dataclasses.replace(options, probes=probes)


async def probe_async(
    selection: Selection,
    bundle: Bundle,
    options: ProbeOptions,
    events: Events | None = None,
    interrupt: asyncio.Event | None = None,
) -> Run:
    """Probe `selection` with `bundle`; setting `interrupt` ends pending hosts as interrupted."""
    interrupt = interrupt or asyncio.Event()
    settings = RunSettings(  # Slurm nodes share one step: none of them waits for a slot
        concurrency=None if selection.slurm else options.concurrency,
        timeout_s=options.host_timeout_s,
        cli_probe_args=probe_args_from(options),
    )
    slurm = slurm_transport(selection, options) if selection.slurm else None
    started = now()
    outcomes = await fan_out(selection, bundle, options, settings, events, interrupt, slurm)
    return Run(
        fleet_version=__version__,
        started=started,
        finished=now(),
        bundle_sha256=bundle.sha256,
        hosts=outcomes,
        probes=tuple(bundle.probes),
        inventory=selection.source,
        interrupted=interrupt.is_set(),
        transport=",".join(sorted({h.transport for h in selection.hosts})),
        slurm=slurm.record() if slurm else None,
        cohort_by=selection.cohort_by,
        facts=bundle.facts(),
        limit=selection.limit,
    )


async def fan_out(
    selection: Selection,
    bundle: Bundle,
    options: ProbeOptions,
    settings: RunSettings,
    events: Events | None,
    interrupt: asyncio.Event,
    slurm: SlurmTransport | None,
) -> dict[str, HostOutcome]:
    """Every selected host's outcome, in the selection's order: in this process, or the SSH hosts
    spread over worker processes (options.workers) while the others run here."""
    remote, here = spread(selection.hosts)
    count = 1 if slurm else worker_count(options.workers, len(remote), settings.concurrency)
    if count <= 1:  # exactly the single process of old
        remote, here = [], list(selection.hosts)
    async with transports_for(here, options.accept_new, options.on_key_recorded, slurm) as ours:
        runs = [FanOut(bundle, ours, settings, events, interrupt).run(here)] if here else []
        if remote:
            opener = SshTransports(options.accept_new, default_state_dir() / "known_hosts")
            workers = WorkerFanOut(
                bundle, opener, settings, count, events, interrupt, options.on_key_recorded
            )
            runs.append(workers.run(remote))
        outcomes = {name: o for part in await asyncio.gather(*runs) for name, o in part.items()}
    return {host.name: outcomes[host.name] for host in selection.hosts}


def probe_and_keep(
    inventory: str | Path | None = None,
    limit: str | None = None,
    probes: Sequence[str] | None = None,
    *,
    hosts: str | None = None,
    slurm: str | None = None,
    options: ProbeOptions | None = None,
    save: bool = True,
    runs_dir: str | Path | None = None,
    json_path: str | Path | None = None,
) -> KeptRun:
    """probe, then keep_run: the run saved in the runs folder (unless not `save`) and its
    document written to `json_path`. Bad input raises before any host is contacted; a run that
    cannot be saved or written does not raise: KeptRun.errors says why."""
    chosen = _with_probes(options or ProbeOptions(), probes)
    selection = select_hosts(inventory, limit, hosts=hosts, slurm=slurm)
    bundle = build_probe_bundle(chosen)
    kept = probe_and_keep_async(
        selection, bundle, chosen, save=save, runs_dir=runs_dir, json_path=json_path
    )
    return asyncio.run(kept)


async def probe_and_keep_async(
    selection: Selection,
    bundle: Bundle,
    options: ProbeOptions,
    events: Events | None = None,
    interrupt: asyncio.Event | None = None,
    *,
    save: bool = True,
    runs_dir: str | Path | None = None,
    json_path: str | Path | None = None,
) -> KeptRun:
    """probe_async, then keep_run (an interrupted run is kept too: what finished is in it)."""
    run = await probe_async(selection, bundle, options, events, interrupt)
    return keep_run(run, save=save, runs_dir=runs_dir, json_path=json_path)


def slurm_transport(selection: Selection, options: ProbeOptions) -> SlurmTransport:
    """One srun step for the selection's usable nodes; the per-host deadline bounds it."""
    from fleet.transport.slurm import SlurmOptions, SlurmTransport, gpu_request

    assert selection.slurm is not None
    slurm_options = SlurmOptions(
        gpus=options.slurm_gpus, extra_args=tuple(options.slurm_args), deadline_s=options.timeout_s
    )
    gpu_request(slurm_options.gpus, selection.slurm.job_id is not None)  # bad --slurm-gpus: now
    return SlurmTransport(selection.slurm, selection.hosts, slurm_options)


@contextlib.asynccontextmanager
async def transports_for(
    hosts: Sequence[Host],
    accept_new: bool,
    on_key_recorded: Callable[[str], None] | None = None,
    slurm: SlurmTransport | None = None,
) -> AsyncIterator[dict[str, Transport]]:
    """The transports `hosts` need (make_transports, plus the Slurm step's), closed on the way
    out whatever happened: bastion connections, the srun step."""
    transports = make_transports(hosts, accept_new, on_key_recorded)
    if slurm is not None:
        transports["slurm"] = slurm
    try:
        yield transports
    finally:
        for transport in transports.values():
            await transport.close()


def make_transports(
    hosts: Sequence[Host],
    accept_new: bool,
    on_key_recorded: Callable[[str], None] | None = None,
) -> dict[str, Transport]:
    """One transport per kind the hosts use; asyncssh is imported only when a host needs SSH."""
    transports: dict[str, Transport] = {"local": LocalTransport()}
    for kind in {h.transport for h in hosts if h.transport.startswith(UNSUPPORTED)}:
        transports[kind] = UnsupportedTransport()
    if any(h.transport == "ssh" for h in hosts):
        from fleet.transport.ssh import SSHOptions, SSHTransport

        options = SSHOptions(
            accept_new=accept_new,
            fleet_known_hosts=default_state_dir() / "known_hosts",
            on_key_recorded=on_key_recorded,
        )
        transports["ssh"] = SSHTransport(options)
    return transports


def now() -> str:
    """This moment in UTC, as runs record their start and end: 2025-01-31T12:00:00.000Z."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
