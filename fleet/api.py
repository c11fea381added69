"""fleet from Python: probe hosts, load and save runs, compare hosts and runs, check rules.

    import fleet
    run = fleet.probe(inventory="inventory/local.yaml", probes=["system"])
    run.hosts["local"].status                      # "ok"
    path = fleet.save_run(run)                     # ~/.local/state/fleet/runs/<id>.json, 0600
    same = fleet.load_run(path)                    # or a name, "latest", "previous"
    fleet.cross_host_diff(same).divergences        # which facts differ between hosts

Everything here raises fleet.errors.FleetError subclasses (bad inventory, bad probe names, a run
that cannot be read); a host that fails never raises: it ends with its own status in the Run.
The CLI (fleet.cli) is a thin layer over these functions. Nothing here prints or exits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.analysis.diff import DEFAULT_TOLERANCE, FleetDiff, compare_hosts
from fleet.analysis.drift import Drift, compare_runs
from fleet.analysis.facts import declared_facts
from fleet.errors import InventoryError, UsageError
from fleet.execution.bundle import Bundle, available_probes, build_bundle
from fleet.execution.fanout import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT_S,
    Events,
    FanOut,
    RunSettings,
)
from fleet.inventory import Inventory, local_inventory
from fleet.inventory.adhoc import AdhocSettings, adhoc_inventory
from fleet.inventory.resolve import check_identity_files, resolve_hosts
from fleet.inventory.sources import load_any_inventory
from fleet.inventory.ssh_config import open_ssh_config
from fleet.models import Host, Run
from fleet.store import default_runs_dir, default_state_dir, resolve_run
from fleet.store import load_run as _load_run_file
from fleet.store import save_run as _save_run_file
from fleet.transport import LocalTransport, Transport
from fleet.transport.unsupported import PREFIX as UNSUPPORTED
from fleet.transport.unsupported import UnsupportedTransport
from fleet.version import __version__

if TYPE_CHECKING:  # loaded only when asked for: the rules engine (jmespath), Slurm, fabric
    from fleet.checks import CheckReport, Rule
    from fleet.fabric.run import FabricEvents, FabricSettings, LaunchTogether
    from fleet.inventory.slurm import SlurmCluster
    from fleet.transport.slurm import SlurmTransport

DEFAULT_PACK = "inference"
MATRIX_TIMEOUT_S = 300.0  # per host, with --allreduce-matrix (30 s sweep + 60 s matrix + the rest)


@dataclass(frozen=True)
class ProbeOptions:
    """How to probe: which probes, their options, and the fan-out's limits."""

    probes: Sequence[str] | None = None  # None: every probe
    allreduce: bool = True  # False drops the allreduce probe (the slow one) from the default set
    quick: bool = False
    allreduce_matrix: bool = False  # the allreduce probe also runs its matrix (which variant wins)
    imports: Sequence[str] = ()  # import specs for the imports probe, e.g. "mod:Name|AltName"
    dir_modules: Sequence[str] = ()  # modules whose dir() the dir probe dumps
    concurrency: int | None = DEFAULT_CONCURRENCY  # caps handshakes and sessions; None: no cap
    timeout_s: float = DEFAULT_TIMEOUT_S
    accept_new: bool = False  # record unknown host keys in fleet's own known_hosts
    probe_dirs: Sequence[str | Path] = ()  # folders of your own probes (also $FLEET_PROBE_DIR)
    extra_probe_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    slurm_args: Sequence[str] = ()  # srun options a site needs: account, QoS, reservation, gres
    slurm_gpus: str = "exclusive"  # how srun asks for the nodes' GPUs: exclusive | none | N
    # told of each host key --accept-new records, one line: host, fingerprint, file
    on_key_recorded: Callable[[str], None] | None = None

    @property
    def host_timeout_s(self) -> float:
        """The matrix adds up to a minute and a half to the allreduce probe: room for it."""
        return max(self.timeout_s, MATRIX_TIMEOUT_S) if self.allreduce_matrix else self.timeout_s


@dataclass(frozen=True)
class Selection:
    """The hosts a command will reach, and where they were described (for the run document)."""

    hosts: list[Host]
    source: str | None
    warnings: tuple[str, ...] = ()  # e.g. ssh_config keywords fleet ignores, one line each
    slurm: SlurmCluster | None = None  # --slurm: the nodes, their states, the job


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
) -> Selection:
    """The hosts to reach, narrowed by `limit` (--limit syntax): those of `inventory` (fleet YAML
    or Ansible), or those the nodeset `hosts` names (-H), or a Slurm target's nodes (`slurm`:
    `partition=NAME`, `nodes=NODESET`, `job=ID`; `adhoc.python` is their interpreter), or else
    this machine. `ssh_config`: a path,
    "none", or None for ~/.ssh/config when it exists; inventory values win over it. A missing
    local identity_file is an InventoryError (a warning when not `require_files`)."""
    if slurm is not None:
        python = adhoc.python if adhoc else None  # --python: the nodes' interpreter
        return _select_slurm_nodes(slurm, limit, inventory or hosts, python)
    loaded = open_inventory(inventory, hosts, inventory_format, adhoc)
    config = open_ssh_config(ssh_config)
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
    return Selection(chosen, resolved.path, tuple(warnings))


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
    return Selection(hosts, loaded.path, slurm=cluster)


def open_inventory(
    inventory: str | Path | None,
    hosts: str | None = None,
    inventory_format: str = "auto",
    adhoc: AdhocSettings | None = None,
) -> Inventory:
    if hosts is not None and inventory is not None:
        raise UsageError(
            "-H and -i name hosts two ways: give one",
            hint="to pick hosts of an inventory, use -i FILE --limit NODESET",
        )
    if hosts is not None:
        return adhoc_inventory(hosts, adhoc)
    if adhoc is not None and adhoc.given():
        flags = ", ".join(f"--{k}" for k in adhoc.given())
        raise UsageError(
            f"{flags} set(s) the hosts of -H only",
            hint="with -i, write these settings in the inventory",
        )
    return load_any_inventory(str(inventory), inventory_format) if inventory else local_inventory()


def build_probe_bundle(options: ProbeOptions) -> Bundle:
    """The probes to ship: `options.probes` (default all), without allreduce when it is off."""
    names = list(options.probes) if options.probes else None
    if not options.allreduce and not options.allreduce_matrix:
        names = [n for n in (names or available_probes(options.probe_dirs)) if n != "allreduce"]
    return build_bundle(names, options.probe_dirs)


def probe_args_from(options: ProbeOptions) -> dict[str, dict[str, Any]]:
    """Options as per-probe arguments; they override the inventory's probe_args."""
    args: dict[str, dict[str, Any]] = {k: dict(v) for k, v in options.extra_probe_args.items()}
    if options.imports:
        args.setdefault("imports", {})["specs"] = list(options.imports)
    if options.dir_modules:
        args.setdefault("dir", {})["modules"] = list(options.dir_modules)
    if options.quick:
        args.setdefault("allreduce", {})["quick"] = True
    if options.allreduce_matrix:
        args.setdefault("allreduce", {})["matrix"] = True
    return args


def probe(
    inventory: str | Path | None = None,
    limit: str | None = None,
    probes: Sequence[str] | None = None,
    *,
    hosts: str | None = None,
    slurm: str | None = None,
    **options: Any,
) -> Run:
    """Probe the selected hosts and return the Run (not saved: see save_run).

    The hosts: an `inventory` file (fleet YAML or Ansible), a nodeset (`hosts="gpu[01-08]"`, as
    -H), or a Slurm target (`slurm="partition=gpu"`); this machine when none is given. `options`
    are ProbeOptions' fields (allreduce, quick, imports, dir_modules, concurrency, timeout_s,
    accept_new, probe_dirs). Raises FleetError for bad input before any host is contacted."""
    probe_options = ProbeOptions(probes=probes, **options)
    selection = select_hosts(inventory, limit, hosts=hosts, slurm=slurm)
    bundle = build_probe_bundle(probe_options)
    return asyncio.run(probe_async(selection, bundle, probe_options))


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
    started = _now()
    async with transports_for(
        selection.hosts, options.accept_new, options.on_key_recorded, slurm
    ) as transports:
        fan_out = FanOut(bundle, transports, settings, events, interrupt)
        outcomes = await fan_out.run(selection.hosts)
    return Run(
        fleet_version=__version__,
        started=started,
        finished=_now(),
        bundle_sha256=bundle.sha256,
        hosts=outcomes,
        probes=tuple(bundle.probes),
        inventory=selection.source,
        interrupted=interrupt.is_set(),
        transport=",".join(sorted({h.transport for h in selection.hosts})),
        slurm=slurm.record() if slurm else None,
    )


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


def save_run(run: Run, runs_dir: str | Path | None = None) -> Path:
    """Save `run` (atomically, 0600) in the runs folder; returns its path."""
    return _save_run_file(run, Path(runs_dir) if runs_dir else default_runs_dir())


def load_run(
    ref: str | Path, runs_dir: str | Path | None = None, inventory: str | None = None
) -> Run:
    """A saved run: a file path, a run's name (or unique prefix), `latest` or `previous`;
    `latest:INV`, or `inventory=INV`, counts only the runs of inventory INV."""
    folder = Path(runs_dir) if runs_dir else default_runs_dir()
    return _load_run_file(resolve_run(str(ref), folder, inventory))


def cross_host_diff(
    run: Run, tolerance: float = DEFAULT_TOLERANCE, probe_dirs: Sequence[str | Path] = ()
) -> FleetDiff:
    """Where the hosts of one run differ: values, name lists, measurements within cohorts.
    `probe_dirs`: where your own probes' FACTS declarations are (besides $FLEET_PROBE_DIR)."""
    return compare_hosts(run.hosts.values(), declared_facts(probe_dirs), tolerance)


def drift(
    old: Run, new: Run, tolerance: float = DEFAULT_TOLERANCE, probe_dirs: Sequence[str | Path] = ()
) -> Drift:
    """What changed per host between two runs."""
    return compare_runs(old, new, declared_facts(probe_dirs), tolerance)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def load_checks(
    packs: Sequence[str] = (),
    rules_files: Sequence[str | Path] = (),
    probe_dirs: Sequence[str | Path] = (),
) -> tuple[list[Rule], list[str]]:
    """Every rule of the packs and files, validated together (ids unique across them), and where
    each set came from. No packs and no files: the `inference` pack. Rules may read your own
    probes too (`probe_dirs`, $FLEET_PROBE_DIR)."""
    from fleet.checks import check_unique_ids, load_rules
    from fleet.checks.packs import pack_path

    chosen = list(packs) if packs or rules_files else [DEFAULT_PACK]
    probes = available_probes(probe_dirs)
    rules: list[Rule] = []
    sources: list[str] = []
    for name in chosen:
        rules += load_rules(pack_path(name), probes)
        sources.append(f"pack {name}")
    for path in rules_files:
        rules += load_rules(path, probes)
        sources.append(str(path))
    check_unique_ids(rules)
    return rules, sources


def check(
    run: Run,
    packs: Sequence[str] = (),
    rules_files: Sequence[str | Path] = (),
    probe_args: Mapping[str, Mapping[str, Any]] | None = None,
    probe_dirs: Sequence[str | Path] = (),
) -> CheckReport:
    """Judge `run` against rules (default: the inference pack); `probe_args` per host name are the
    inventory's (rules read them as `_args`)."""
    from fleet.checks import evaluate

    rules, _ = load_checks(packs, rules_files, probe_dirs)
    return evaluate(rules, run, probe_args or {})


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
    (Selection.slurm): the hosts are that cluster's nodes, each group launched by its own srun."""
    from fleet.fabric import launch
    from fleet.fabric.run import FabricRounds

    started = _now()
    together = slurm_steps(slurm, settings, slurm_args, slurm_gpus) if slurm else None
    async with transports_for(hosts, accept_new) as transports:
        rounds = FabricRounds(transports, settings, events, interrupt, together)
        outcome = await rounds.run(hosts)
    return Run(
        fleet_version=__version__,
        started=started,
        finished=_now(),
        bundle_sha256=launch.code_sha256(),
        hosts=outcome.outcomes,
        probes=("fabric",),
        inventory=inventory,
        interrupted=outcome.interrupted,
        transport=",".join(sorted({h.transport for h in hosts})),
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
