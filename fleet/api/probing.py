"""Probing: the bundle of probes built, run on every selected host at once, and the Run it makes;
probe_and_keep adds saving it and writing its JSON, as `fleet probe` does."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.api.hosts import Selection, select_hosts
from fleet.collector import loading_more
from fleet.errors import UsageError
from fleet.execution.bundle import Bundle, available_probes, build_bundle
from fleet.execution.fanout import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT_S,
    Events,
    FanOut,
    RunSettings,
)
from fleet.models import Host, HostOutcome, Run, now
from fleet.registry import declared
from fleet.registry.options import ProbeOption
from fleet.transport import Transport
from fleet.transport.unsupported import PREFIX as UNSUPPORTED
from fleet.transport.unsupported import UnsupportedTransport

if TYPE_CHECKING:  # loaded only when asked for
    from fleet.api.runs import KeptRun
    from fleet.execution.workers import SeedProcess
    from fleet.transport.slurm import SlurmTransport

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

    probes: Sequence[str] | None = None  # None: every probe but the opt-in ones
    # the probes' own options, by key, as their units declare them (fleet/units/PROBE/probe.py,
    # `fleet probe --help`): {"quick": True, "allreduce_matrix": True, "sample_s": 5, …}
    values: Mapping[str, Any] = field(default_factory=dict)
    concurrency: int | None = DEFAULT_CONCURRENCY  # caps handshakes and sessions; None: no cap
    timeout_s: float = DEFAULT_TIMEOUT_S
    accept_new: bool = False  # record unknown host keys in fleet's own known_hosts
    probe_dirs: Sequence[str | Path] = ()  # folders of your own probes (also $FLEET_PROBE_DIR)
    extra_probe_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    slurm_args: Sequence[str] = ()  # srun options a site needs: account, QoS, reservation, gres
    slurm_gpus: str = "exclusive"  # how srun asks for the nodes' GPUs: exclusive | none | N
    # told of each host key --accept-new records, one line: host, fingerprint, file
    on_key_recorded: Callable[[str], None] | None = None
    # worker processes the SSH hosts are spread over (fleet/execution/workers.py); None: one per
    # core, fewer for a small fleet; 1: every host in this process
    workers: int | None = None
    # the workers' seed, started while the inventory was read (ProbePlan.make): the
    # run's workers are forked from it, or it is discarded when the run needs none
    seed: SeedProcess | None = None

    def __post_init__(self) -> None:
        unknown = set(self.values) - set(declared.option_defaults())
        if unknown:
            raise UsageError(f"unknown probe option(s): {', '.join(sorted(unknown))}")

    def value(self, key: str) -> Any:
        """An option's value: given, else its declared default."""
        return self.values.get(key, declared.option_defaults().get(key))

    def given(self) -> list[tuple[str, ProbeOption]]:
        """(probe, option) for every option that asks for something."""
        return [(p, o) for p, o in declared.declared_options() if o.given(self.value(o.key))]

    @staticmethod
    def command_line() -> list[ProbeOption]:
        """The probes' options as the command line offers them (their units declare them)."""
        return declared.command_line_options()

    @staticmethod
    def probe_run_by(command: str) -> str:
        """The probe a command runs alone (`jobs`: live), as its unit says (COMMAND)."""
        return declared.command_probe(command)

    @property
    def host_timeout_s(self) -> float:
        """Each host's deadline: timeout_s, raised to what the options given need (a probe
        that runs longer with them: the allreduce matrix, gpubench)."""
        return max([self.timeout_s] + [o.least_timeout_s for _, o in self.given()])


def build_probe_bundle(options: ProbeOptions) -> Bundle:
    """The probes to ship: `options.probes` (default all but the opt-in ones), with the ones an
    option adds (--gpubench) and without the ones switched off (--no-allreduce). Raises
    UsageError for an unknown probe name, before any host is contacted."""
    names = chosen_probes(options)
    added = {p for p, o in options.given() if o.adds}
    without = [p for p, o in options.given() if o.drops and p not in added]
    if names is None:  # every probe but the opt-in ones not asked for
        without += sorted(declared.opt_in() - added)
    return build_bundle(names, options.probe_dirs, without)


def chosen_probes(options: ProbeOptions) -> list[str] | None:
    """The probes named (options.probes, with those an option adds); None: the default set."""
    if not options.probes:
        return None
    names = list(options.probes)
    return names + [p for p, o in options.given() if o.adds and p not in names]


def probe_args_from(options: ProbeOptions) -> dict[str, dict[str, Any]]:
    """Options as per-probe arguments; they override the inventory's probe_args. An option
    shared by several probes (--quick) fills only those that run."""
    args: dict[str, dict[str, Any]] = {k: dict(v) for k, v in options.extra_probe_args.items()}
    named = chosen_probes(options)
    opted = declared.opt_in() - {p for p, o in options.given() if o.adds}
    for probe, option in options.given():
        runs = probe in named if named is not None else probe not in opted
        filled = option.probe_args(options.value(option.key))
        if filled and (runs or len(declared.option_probes(option.key)) == 1):
            args.setdefault(probe, {}).update(filled)
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
    how to probe (ProbeOptions: probes, values (the probes' options), timeout_s, concurrency, …);
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
    from fleet.api.runs import assemble_run  # the store's modules: once the hosts have started

    return assemble_run(
        started,
        selection.hosts,
        outcomes,
        bundle_sha256=bundle.sha256,
        probes=tuple(bundle.probes),
        inventory=selection.source,
        interrupted=interrupt.is_set(),
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
    remote, here, count = _spread(selection.hosts, options, settings, slurm)
    if not remote and options.seed is not None:
        options.seed.discard()  # started early for a run that needs no worker after all
    async with transports_for(here, options.accept_new, options.on_key_recorded, slurm) as ours:
        runs = [FanOut(bundle, ours, settings, events, interrupt).run(here)] if here else []
        if remote:
            from fleet.execution.workers import SshTransports, WorkerFanOut
            from fleet.store import default_state_dir

            opener = SshTransports(options.accept_new, default_state_dir() / "known_hosts")
            workers = WorkerFanOut(
                bundle,
                opener,
                settings,
                count,
                events,
                interrupt,
                options.on_key_recorded,
                options.seed,
            )
            runs.append(workers.run(remote))
        outcomes = {name: o for part in await asyncio.gather(*runs) for name, o in part.items()}
    return {host.name: outcomes[host.name] for host in selection.hosts}


def _spread(
    hosts: Sequence[Host],
    options: ProbeOptions,
    settings: RunSettings,
    slurm: SlurmTransport | None,
) -> tuple[list[Host], list[Host], int]:
    """The hosts for worker processes, those for this one, and how many workers: none when one
    or none is wanted (all hosts here), or when there is only this machine, whose run then
    loads no worker module before it starts."""
    if slurm is not None or all(host.transport == "local" for host in hosts):
        return [], list(hosts), 1
    from fleet.execution.workers import spread, worker_count

    remote, here = spread(hosts)
    count = worker_count(options.workers, len(remote), settings.concurrency)
    if count <= 1:
        return [], list(hosts), 1  # exactly the single process of old
    return remote, here, count


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
    from fleet.api.runs import keep_run  # the store's modules: once the hosts have started

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
    """One transport per kind the hosts use; asyncssh is imported only when a host needs SSH,
    the local transport (and its interpreter choice) only when a host is this machine."""
    transports: dict[str, Transport] = {}
    if any(h.transport == "local" for h in hosts):
        from fleet.transport.local import LocalTransport

        transports["local"] = LocalTransport()
    for kind in {h.transport for h in hosts if h.transport.startswith(UNSUPPORTED)}:
        transports[kind] = UnsupportedTransport()
    if any(h.transport == "ssh" for h in hosts):
        with loading_more():
            from fleet.store import default_state_dir
            from fleet.transport.ssh import SSHOptions, SSHTransport

        options = SSHOptions(
            accept_new=accept_new,
            fleet_known_hosts=default_state_dir() / "known_hosts",
            on_key_recorded=on_key_recorded,
        )
        transports["ssh"] = SSHTransport(options)
    return transports
