"""Live NCCL jobs across a fleet: the `live` probe's ranks joined into jobs. Pure.

Each host's `live` probe (probes/live.py) reports the NCCL processes running there (pid, state,
the libnccl file each mapped) and what NCCL RAS said of their communicators. RAS already
collects every rank of a communicator, on every node, so the report of one host names ranks on
others, by IP address and pid. Here the reports of all hosts are joined by communicator hash:

- per job: its hosts, its ranks (rank, host, pid, GPU, the NCCL version and libnccl file that
  rank's process mapped, its process state, its RAS status and collective counts);
- dead or missing ranks, named with their host; ranks whose collective counts lag or differ;
  asynchronous errors; ranks that mapped different libnccl builds (a finding: the job runs two
  NCCLs); which host to look at first, and why;
- what could not be judged: hosts whose probe did not run or could not read (a RAS that did not
  answer, another user's processes), NCCL processes that no communicator names.

An IP address RAS reports is a fleet host when exactly one host has it among its addresses (the
probe's `local_addresses`, or the inventory address); 127.0.0.1 and ::1 are the reporting host.
Otherwise the rank's host is the address itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fleet.models import HostOutcome, Run

LIVE_SCHEMA = "fleet.jobs/1"  # `fleet jobs --json`: fleet/schemas/jobs.schema.json
PROBE = "live"
# Process states that freeze a rank (D, uninterruptible sleep, is often a moment in the driver).
STOPPED = {"T": "stopped", "t": "stopped by a tracer", "Z": "a zombie"}
NOT_AN_ERROR = (0, 7)  # ncclSuccess, ncclInProgress
LOOPBACK = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class Rank:
    """One rank of a job, as RAS and the rank's own host saw it."""

    rank: int
    host: str | None  # fleet host name, else the address RAS gave
    address: str | None
    pid: int | None
    cuda_dev: int | None = None
    gpus: tuple[str, ...] = ()  # GPU uuids its process holds (nvidia-smi on its host)
    nccl_version: str | None = None  # of the libnccl its process mapped
    library: str | None = None  # that file's path
    build_id: str | None = None
    state: str | None = None  # its process state (S, R, T, Z ...) when its host read it
    status: str | None = None  # RAS: RUNNING, INIT, FINALIZE, ABORT
    async_error: int | None = None
    collective_counts: Mapping[str, int] = field(default_factory=dict)
    missing: str | None = None  # why RAS has no data from it; None when it answered


@dataclass(frozen=True)
class Blame:
    host: str | None
    rank: int | None
    reason: str


@dataclass(frozen=True)
class Job:
    """One communicator (by RAS hash) with every rank the fleet's reports name."""

    comm: str
    size: int | None
    hosts: tuple[str, ...]
    ranks: tuple[Rank, ...]
    reported_by: tuple[str, ...]  # the hosts whose RAS answer held this communicator
    nccl_versions: tuple[str, ...]
    libraries: tuple[str, ...]  # distinct libnccl builds mapped (build id, else path)
    findings: tuple[str, ...]
    blame: Blame | None
    ras_nccl_versions: tuple[str, ...] = ()  # of the RAS servers that reported it


@dataclass(frozen=True)
class LiveReport:
    jobs: tuple[Job, ...]
    unjoined: Mapping[str, tuple[str, ...]]  # host -> NCCL processes no communicator names
    not_judged: Mapping[str, tuple[str, ...]]  # host -> what its probe could not read
    hosts: tuple[str, ...]
    findings: tuple[str, ...] = ()  # outside any job: a stopped NCCL process RAS cannot name
    # host -> RAS endpoints that two jobs there share (the probe's problems.shared_ras_ports)
    shared_ras_ports: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def healthy(self) -> bool | None:
        """True: every job is whole and clean; False: a finding; None: something not judged."""
        if self.findings or any(job.findings for job in self.jobs):
            return False
        return None if self.not_judged else True

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": LIVE_SCHEMA,
            "hosts": list(self.hosts),
            "healthy": self.healthy,
            "findings": list(self.findings),
            "jobs": [asdict(job) for job in self.jobs],
            "unjoined": {h: list(v) for h, v in self.unjoined.items()},
            "not_judged": {h: list(v) for h, v in self.not_judged.items()},
            "shared_ras_ports": {h: list(v) for h, v in self.shared_ras_ports.items()},
        }


PROBE = "live"
TOPIC = PROBE  # what a finding about a job is about (fleet/units/live/probe.py says the same)


def ran_live(run: Run) -> bool:
    """Whether any host ran the live probe: a run without it has no jobs to say."""
    return PROBE in run.probes or any(PROBE in o.probes for o in run.hosts.values())


def live_jobs(run: Run) -> LiveReport:
    """The jobs of `run`: every communicator any host's RAS reported, joined across hosts."""
    data = {name: _live_data(outcome) for name, outcome in run.hosts.items()}
    read = {name: d for name, d in data.items() if d is not None}
    not_judged: dict[str, tuple[str, ...]] = {}
    for name, outcome in run.hosts.items():
        lines = _not_judged(outcome, data[name])
        if lines:
            not_judged[name] = lines
    resolve = _Addresses(run.hosts, read)
    views: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for name, host_data in read.items():
        for comm in host_data.get("communicators") or []:
            if isinstance(comm, Mapping) and comm.get("hash"):
                views.setdefault(str(comm["hash"]), []).append((name, comm))
    processes = {name: _processes(host_data) for name, host_data in read.items()}
    jobs = tuple(_job(comm, views[comm], resolve, processes) for comm in sorted(views, key=str))
    joined = {(rank.host, rank.pid) for job in jobs for rank in job.ranks}
    unjoined: dict[str, tuple[str, ...]] = {}
    findings: list[str] = []
    for name, host_data in read.items():
        outside = _unjoined(name, host_data, joined)
        if outside:
            unjoined[name] = tuple(line for line, _ in outside)
            findings += [f"{name}: {line}" for line, state in outside if state in STOPPED]
    shared = {name: ports for name, d in read.items() if (ports := _shared_ports(d))}
    return LiveReport(jobs, unjoined, not_judged, tuple(run.hosts), tuple(findings), shared)


# ------------------------------------------------------------------------------- reading hosts


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _live_data(outcome: HostOutcome) -> Mapping[str, Any] | None:
    result = outcome.probes.get(PROBE)
    if result is None or result.status != "ok" or not isinstance(result.data, Mapping):
        return None
    return result.data


def _not_judged(outcome: HostOutcome, data: Mapping[str, Any] | None) -> tuple[str, ...]:
    result = outcome.probes.get(PROBE)
    if result is None:
        if outcome.status != "ok" and not outcome.probes:  # not reached, or no result at all
            return (f"host {outcome.status}" + (f": {outcome.error}" if outcome.error else ""),)
        return ("probe live was not run",)
    if data is None:
        return (f"probe live {result.status}" + (f": {result.error}" if result.error else ""),)
    problems = _mapping(data.get("problems"))
    lines = [str(line) for line in problems.get("uncovered") or []]
    unreadable = _mapping(data.get("unreadable"))
    if unreadable.get("hidepid"):
        lines.append("/proc is mounted with hidepid: other users' processes are not listed")
    return tuple(lines)


def _shared_ports(data: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(line) for line in _mapping(data.get("problems")).get("shared_ras_ports") or [])


def _processes(data: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    """Each NCCL process of a host by the pid RAS knows it by (its own namespace's pid)."""
    found: dict[int, Mapping[str, Any]] = {}
    unreadable = _mapping(data.get("unreadable"))
    for process in list(data.get("processes") or []) + list(unreadable.get("nccl_processes") or []):
        if isinstance(process, Mapping) and isinstance(process.get("pid"), int):
            found[process.get("ns_pid") or process["pid"]] = process
    return found


class _Addresses:
    """IP address -> fleet host, where exactly one host claims it."""

    def __init__(self, hosts: Mapping[str, HostOutcome], read: Mapping[str, Mapping[str, Any]]):
        owners: dict[str, set[str]] = {}
        self.own: dict[str, set[str]] = {}
        for name, outcome in hosts.items():
            addresses = {outcome.address} if outcome.address else set()
            addresses |= {str(a) for a in (read.get(name) or {}).get("local_addresses") or []}
            self.own[name] = addresses
            for address in addresses - set(LOOPBACK):
                owners.setdefault(address, set()).add(name)
        self.unique = {a: next(iter(names)) for a, names in owners.items() if len(names) == 1}

    def host(self, address: str | None, reporter: str) -> str | None:
        if address is None:
            return None
        if address in LOOPBACK or address in self.own.get(reporter, set()):
            return reporter
        return self.unique.get(address, address)


# ------------------------------------------------------------------------------- joining a job


def _job(
    comm: str,
    views: Sequence[tuple[str, Mapping[str, Any]]],
    resolve: _Addresses,
    processes: Mapping[str, Mapping[int, Mapping[str, Any]]],
) -> Job:
    present: dict[int, tuple[str, Mapping[str, Any]]] = {}
    missing: dict[int, tuple[str, Mapping[str, Any]]] = {}
    for reporter, view in views:
        for raw in view.get("ranks") or []:
            if isinstance(raw, Mapping) and isinstance(raw.get("rank"), int):
                present.setdefault(raw["rank"], (reporter, raw))
        for raw in view.get("missing_ranks") or []:
            if isinstance(raw, Mapping) and isinstance(raw.get("rank"), int):
                missing.setdefault(raw["rank"], (reporter, raw))
    ranks = [_rank(r, v, resolve, processes) for r, v in present.values()]
    ranks += [
        _rank(r, v, resolve, processes, missing=_why_missing(v))
        for number, (r, v) in missing.items()
        if number not in present
    ]
    size = next((v.get("size") for _, v in views if isinstance(v.get("size"), int)), None)
    known = {rank.rank for rank in ranks}
    for number in range(size or 0):
        if number not in known:
            ranks.append(Rank(number, None, None, None, missing="in no report"))
    ranks.sort(key=lambda rank: rank.rank)
    versions = sorted({str(r.nccl_version) for r in ranks if r.nccl_version})
    builds = sorted({_build(r) for r in ranks if _build(r)})
    findings = _findings(ranks, versions, builds)
    return Job(
        comm=comm,
        size=size,
        hosts=tuple(sorted({r.host for r in ranks if r.host})),
        ranks=tuple(ranks),
        reported_by=tuple(sorted({reporter for reporter, _ in views})),
        nccl_versions=tuple(versions),
        libraries=tuple(str(b) for b in builds),
        findings=tuple(findings),
        blame=_blame(ranks, builds),
        ras_nccl_versions=tuple(
            sorted({str(v["nccl_version"]) for _, v in views if v.get("nccl_version")})
        ),
    )


def _rank(
    reporter: str,
    raw: Mapping[str, Any],
    resolve: _Addresses,
    processes: Mapping[str, Mapping[int, Mapping[str, Any]]],
    missing: str | None = None,
) -> Rank:
    address = raw.get("host") if isinstance(raw.get("host"), str) else None
    host = resolve.host(address, reporter)
    pid = raw.get("pid") if isinstance(raw.get("pid"), int) else None
    process = (processes.get(host or "") or {}).get(pid) if pid is not None else None
    library = _first_nccl(process)
    status = _mapping(raw.get("status"))
    counts = _mapping(raw.get("collective_counts"))
    return Rank(
        rank=int(raw["rank"]),
        host=host,
        address=address,
        pid=pid,
        cuda_dev=raw.get("cuda_dev") if isinstance(raw.get("cuda_dev"), int) else None,
        gpus=tuple(
            str(g.get("uuid")) for g in (process or {}).get("gpus") or [] if isinstance(g, Mapping)
        ),
        nccl_version=library.get("version"),
        library=library.get("path"),
        build_id=library.get("build_id"),
        state=(process or {}).get("state"),
        status=None if missing else _status(status),
        async_error=status.get("async_error")
        if isinstance(status.get("async_error"), int)
        else None,
        collective_counts={str(k): int(v) for k, v in counts.items() if isinstance(v, int)},
        missing=missing,
    )


def _first_nccl(process: Mapping[str, Any] | None) -> Mapping[str, Any]:
    libraries = (process or {}).get("libraries")
    found = (libraries or {}).get("nccl") if isinstance(libraries, Mapping) else None
    return found[0] if found and isinstance(found[0], Mapping) else {}


def _status(status: Mapping[str, Any]) -> str:
    """NCCL's own order (src/ras/client_support.cc): abort, finalize/destroy, then init state."""
    if status.get("abort_flag"):
        return "ABORT"
    if status.get("finalize_called") or status.get("destroy_flag"):
        return "FINALIZE"
    return "RUNNING" if status.get("init_state") == 0 else "INIT"


def _build(rank: Rank) -> str:
    """The identity of the libnccl a rank mapped: its build id, else its path ("" unknown)."""
    return rank.build_id or rank.library or ""


def _why_missing(raw: Mapping[str, Any]) -> str:
    status = _mapping(raw.get("status"))
    if status.get("considered_dead"):
        return "considered dead"
    if status.get("unresponsive"):
        return "unresponsive"
    return "answered without this communicator"


# ------------------------------------------------------------------------------- judging a job


def _where(rank: Rank) -> str:
    gpu = f", GPU {rank.cuda_dev}" if rank.cuda_dev is not None else ""
    return f"rank {rank.rank} (pid {rank.pid} on {rank.host or '?'}{gpu})"


def _findings(ranks: Sequence[Rank], versions: Sequence[str], builds: Sequence[str]) -> list[str]:
    found = []
    for rank in ranks:
        if rank.state in STOPPED:
            found.append(f"{_where(rank)}: its process is {STOPPED[rank.state]}")
        if rank.missing:
            found.append(f"{_where(rank)}: missing, {rank.missing}")
        if rank.async_error is not None and rank.async_error not in NOT_AN_ERROR:
            found.append(f"{_where(rank)}: asynchronous error {rank.async_error}")
    for op, behind, high in _lagging(ranks):
        names = ", ".join(f"{_where(r)} at {r.collective_counts[op]}" for r in behind)
        found.append(f"{op} counts differ: {names}; the others at {high}")
    statuses = sorted({r.status for r in ranks if r.status})
    if len(statuses) > 1:
        found.append("ranks in different states: " + ", ".join(statuses))
    if len(builds) > 1:
        found.append(
            "ranks mapped different libnccl builds: "
            + "; ".join(_build_text(b, ranks) for b in builds)
            + (f" (NCCL {', '.join(versions)})" if versions else "")
        )
    return found


def _build_text(build: str, ranks: Sequence[Rank]) -> str:
    using = [r for r in ranks if _build(r) == build]
    where = ", ".join(f"rank {r.rank} on {r.host}" for r in using)
    example = using[0]
    return f"{example.library} {example.nccl_version or '?'} (build {str(build)[:12]}): {where}"


def _lagging(ranks: Sequence[Rank]) -> list[tuple[str, list[Rank], int]]:
    """(op, the ranks behind the highest count, that count) for each op whose counts differ."""
    alive = [r for r in ranks if not r.missing]
    found = []
    for op in sorted({op for r in alive for op in r.collective_counts}):
        counts = [r.collective_counts[op] for r in alive if op in r.collective_counts]
        if counts and min(counts) != max(counts):
            high = max(counts)
            behind = [r for r in alive if r.collective_counts.get(op, high) < high]
            found.append((op, sorted(behind, key=lambda r: r.collective_counts[op]), high))
    return found


def _blame(ranks: Sequence[Rank], builds: Sequence[str]) -> Blame | None:
    """The host to look at first: a stopped process, then a dead rank, an unresponsive one, an
    asynchronous error, the rank furthest behind in its collectives, the odd libnccl build."""
    return _blame_state(ranks) or _blame_lagging(ranks) or _blame_build(ranks, builds)


def _blame_state(ranks: Sequence[Rank]) -> Blame | None:
    """A stopped process, a rank missing as dead or unresponsive, an asynchronous error."""
    for rank in ranks:
        if rank.state in STOPPED:
            return Blame(
                rank.host, rank.rank, f"{_where(rank)}: its process is {STOPPED[rank.state]}"
            )
    for why in ("considered dead", "unresponsive", "in no report"):
        for rank in ranks:
            if rank.missing == why:
                return Blame(rank.host, rank.rank, f"{_where(rank)}: missing, {why}")
    for rank in ranks:
        if rank.async_error is not None and rank.async_error not in NOT_AN_ERROR:
            return Blame(
                rank.host, rank.rank, f"{_where(rank)}: asynchronous error {rank.async_error}"
            )
    return None


def _blame_lagging(ranks: Sequence[Rank]) -> Blame | None:
    """The rank furthest behind in its collectives, else one missing for another reason."""
    lagging = _lagging(ranks)
    if lagging:
        op, behind, high = lagging[0]
        last = behind[0]
        return Blame(
            last.host,
            last.rank,
            f"{_where(last)}: furthest behind in {op} ({last.collective_counts[op]} of {high})",
        )
    for rank in ranks:
        if rank.missing:
            return Blame(rank.host, rank.rank, f"{_where(rank)}: missing, {rank.missing}")
    return None


def _blame_build(ranks: Sequence[Rank], builds: Sequence[str]) -> Blame | None:
    """The rank on the least used libnccl build, when the job mixes builds."""
    if len(builds) > 1:
        counts = {b: sum(1 for r in ranks if _build(r) == b) for b in builds}
        odd = min(builds, key=lambda b: (counts[b], str(b)))
        rank = next(r for r in ranks if _build(r) == odd)
        return Blame(rank.host, rank.rank, f"{_where(rank)}: the least used libnccl build")
    return None


def _unjoined(
    name: str, data: Mapping[str, Any], joined: Iterable[tuple[str | None, int | None]]
) -> list[tuple[str, str | None]]:
    """(line, process state) of this host's NCCL processes (serving RAS, or with NCCL's
    threads) that are in no job."""
    seen = set(joined)
    found = []
    for pid, process in sorted(_processes(data).items()):
        serves = process.get("ras_listener") or process.get("nccl_threads") or process.get("ranks")
        if serves and (name, pid) not in seen and (name, process.get("pid")) not in seen:
            state = process.get("state")
            how = f": {STOPPED[state]}, in no RAS answer" if state in STOPPED else ""
            gpus = _gpus_held(process)
            found.append(
                (f"pid {process.get('pid')}{gpus} ({_short(process.get('cmdline'))}){how}", state)
            )
    return found


def _gpus_held(process: Mapping[str, Any]) -> str:
    """` on GPU-89824593`: the GPUs nvidia-smi says the process holds (by UUID: the live probe
    reads no index), for a process RAS cannot name."""
    uuids = [str(g.get("uuid")) for g in process.get("gpus") or [] if isinstance(g, Mapping)]
    return f" on {', '.join(u[:12] for u in uuids if u)}" if uuids else ""


def _short(text: Any, limit: int = 80) -> str:
    words = " ".join(str(text or "?").split())
    return words if len(words) <= limit else words[: limit - 1] + "…"


# ------------------------------------------------------------------------------- what readers show


def rank_where(rank: Rank) -> str:
    """Where a rank is on its host, as a finding's `where` says it: `rank R pid P GPU G`."""
    pid = rank.pid if rank.pid is not None else "?"
    gpu = f" GPU {rank.cuda_dev}" if rank.cuda_dev is not None else ""
    return f"rank {rank.rank} pid {pid}{gpu}"


def rank_troubles(job: Job) -> list[tuple[Rank, str, str]]:
    """(rank, kind, why) for each rank that is stopped, missing, in error or lagging, in the
    job's rank order; kind is one of `stopped`, `missing`, `error`, `lagging`."""
    found: list[tuple[Rank, str, str]] = []
    for rank in job.ranks:
        if rank.state in STOPPED:
            found.append((rank, "stopped", f"its process is {STOPPED[rank.state]}"))
        if rank.missing:
            found.append((rank, "missing", f"missing, {rank.missing}"))
        if rank.async_error is not None and rank.async_error not in NOT_AN_ERROR:
            found.append((rank, "error", f"asynchronous error {rank.async_error}"))
    for op, behind, high in _lagging(job.ranks):
        for rank in behind:
            found.append(
                (rank, "lagging", f"behind in {op}: {rank.collective_counts[op]} of {high}")
            )
    order = {rank.rank: index for index, rank in enumerate(job.ranks)}
    return sorted(found, key=lambda item: order[item[0].rank])


def rank_state(rank: Rank) -> str:
    """One word or two for a rank's row: stopped, missing (why), else RAS's status."""
    if rank.state in STOPPED:
        return STOPPED[rank.state]
    if rank.missing:
        return f"missing ({rank.missing})"
    return rank.status or "?"
