"""Baselines: per cohort, each measurement's median and band over known-good runs, and the
software they were made on. Built from runs here; written and read by fleet.analysis.baselines.file;
runs are judged against one by fleet.analysis.baselines.judge. Pure.

A host's cohort is the diff's (fleet.analysis.across_hosts.cohorts: GPU model × count × interconnect, or the
runs' `cohort_by`). A host whose run had no gpu probe (`fleet probe -p allreduce`) is placed by the
GPU model and count its allreduce reported, in the cohort of that model and count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.analysis.across_hosts.cohorts import default_key, find_cohorts
from fleet.analysis.across_runs.bands import DEFAULT_FLOOR, DEFAULT_K, Band, make_band
from fleet.analysis.across_runs.measured import Key, baseline_families, host_measured
from fleet.analysis.baselines.identity import VERSIONS, gpu_identity, host_versions
from fleet.analysis.classes import FactCache
from fleet.analysis.facts import HostFacts, ProbeFacts
from fleet.errors import UsageError
from fleet.models import NOT_REACHED, HostOutcome, ProbeResult, Run
from fleet.registry import declared

BASELINE_SCHEMA = "fleet.baseline/1"


@dataclass(frozen=True)
class Gpu:
    """What a default cohort is made of; `interconnect` None when the run did not say."""

    model: str
    count: int
    interconnect: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "count": self.count, "interconnect": self.interconnect}


@dataclass(frozen=True)
class Placed:
    """A host's cohort in one run; `inferred`: from its allreduce's GPU model and count."""

    cohort: str
    label: str
    gpu: Gpu | None = None
    inferred: bool = False


@dataclass(frozen=True)
class BaselineCohort:
    name: str
    label: str
    gpu: Gpu | None
    hosts: tuple[str, ...]
    runs: int  # how many of the baseline's runs had a host of this cohort
    versions: Mapping[str, tuple[str, ...]]  # torch, cuda, nccl, driver → values seen
    bands: Mapping[Key, Band]


@dataclass(frozen=True)
class MadeFrom:
    """One run a baseline was made from."""

    location: str
    started: str
    inventory: str | None
    fleet_version: str
    hosts: int  # hosts of that run that gave measurements


@dataclass(frozen=True)
class Baseline:
    fleet_version: str  # the fleet that made it
    created: str
    k: float
    floor: float
    cohort_by: str | None
    runs: tuple[MadeFrom, ...]
    cohorts: Mapping[str, BaselineCohort]
    path: str = ""  # where it was read from ("" when made here)
    lines: Mapping[str, int] = field(default_factory=dict, compare=False)  # cohort → line

    @property
    def families(self) -> tuple[str, ...]:
        have = {key.family for c in self.cohorts.values() for key in c.bands}
        return tuple(f for f in baseline_families() if f in have)


# ------------------------------------------------------------------------------------- cohorts


def place_hosts(
    run: Run, declarations: Mapping[str, ProbeFacts], cohort_by: str | None = None
) -> dict[str, Placed]:
    """Each reporting host's cohort: the diff's, named as the diff names it. Hosts whose GPUs
    read alike share their facts, their cohort's key and their placing (made once)."""
    reporting = [o for o in run.hosts.values() if o.status not in NOT_REACHED and o.probes]
    cache = FactCache(declarations)
    facts: dict[str, HostFacts] = {}
    alike: dict[tuple[str, ...] | None, HostFacts] = {}  # hosts whose GPUs read alike
    members: dict[tuple[str, ...] | None, list[str]] = {}
    source = declared.gpu_sources()[0]  # the gpu probe: what a host's GPUs are
    for outcome in reporting:
        result = outcome.probes.get(source)
        key = None if result is None else _gpu_key(result)
        found = alike.get(key)
        if found is None:
            found = alike[key] = HostFacts() if result is None else cache.part(source, result)[1]
        facts[outcome.name] = found
        members.setdefault(key, []).append(outcome.name)
    groups = {key: tuple(hosts) for key, hosts in members.items()}
    cohorts = find_cohorts(reporting, groups, alike, cohort_by)
    placed: dict[str, Placed] = {}
    shared: dict[tuple[str, int], Placed | None] = {}  # by cohort and facts: alike, or None
    for cohort in cohorts:
        for host in cohort.hosts:
            slot = (cohort.name, id(facts[host]))
            if slot not in shared:
                shared[slot] = _placed_alike(cohort.name, cohort.label, facts[host], cohort_by)
            where = shared[slot]
            if where is None:  # placed by the host's own allreduce
                where = _placed(cohort.name, cohort.label, facts[host], run.hosts[host], cohort_by)
            placed[host] = where
    return placed


def _gpu_key(result: ProbeResult) -> tuple[str, ...]:
    """What a host's cohort and placing read of its gpu payload (cohorts.default_key): the
    model, the count, the interconnect and the status; each host's GPUs have their own UUIDs,
    so the payloads themselves are all distinct."""
    data = result.data if isinstance(result.data, Mapping) else {}
    gpus = data.get("gpus")
    first = gpus[0] if isinstance(gpus, list) and gpus else None
    name = first.get("name") if isinstance(first, Mapping) else first
    length = len(gpus) if isinstance(gpus, list) else None
    parts = (data.get("gpu_count"), length, name, data.get("interconnect"))
    return (result.status, *(repr(part) for part in parts))


def _placed_alike(name: str, label: str, facts: HostFacts, cohort_by: str | None) -> Placed | None:
    """The placing of every host of cohort `name` with these GPU facts; None where it is the
    host's own (its GPUs inferred from its allreduce)."""
    if cohort_by:
        return Placed(name, label)
    key = default_key(facts)
    if key.model is not None and isinstance(key.count, int):
        link = key.link if isinstance(key.link, str) and key.link != "?" else None
        return Placed(name, label, Gpu(key.model, key.count, link))
    return None


def _placed(
    name: str, label: str, facts: HostFacts, outcome: HostOutcome, cohort_by: str | None
) -> Placed:
    alike = _placed_alike(name, label, facts, cohort_by)
    if alike is not None:
        return alike
    identity = gpu_identity(outcome)
    if identity is None:
        return Placed(name, label)
    model, count = identity
    return Placed(f"{count}× {model}", f"{count}× {model}", Gpu(model, count, None), True)


def same_gpus(a: Gpu, b: Gpu) -> bool:
    """The same model and count, and the same interconnect where both say one."""
    links = a.interconnect is None or b.interconnect is None or a.interconnect == b.interconnect
    return a.model == b.model and a.count == b.count and links


def match_cohort(placed: Placed, cohorts: Mapping[str, BaselineCohort]) -> BaselineCohort | None:
    """The baseline cohort of a host: the one of its name, else (a run that did not say the
    interconnect, or a baseline made from such runs) the only one of the same GPUs."""
    if placed.cohort in cohorts:
        return cohorts[placed.cohort]
    if placed.gpu is None:
        return None
    alike = [c for c in cohorts.values() if c.gpu is not None and same_gpus(c.gpu, placed.gpu)]
    return alike[0] if len(alike) == 1 else None


# ------------------------------------------------------------------------------------ building


@dataclass
class _Samples:
    placed: Placed
    hosts: set[str] = field(default_factory=set)
    runs: set[int] = field(default_factory=set)
    versions: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    values: dict[Key, list[float]] = field(default_factory=lambda: defaultdict(list))


def build_baseline(
    runs: Sequence[tuple[str, Run]],
    declarations: Mapping[str, ProbeFacts],
    *,
    fleet_version: str,
    created: str,
    k: float = DEFAULT_K,
    floor: float = DEFAULT_FLOOR,
    cohort_by: str | None = None,
) -> Baseline:
    """A baseline from known-good runs (location, run): every measurement of every host, pooled
    per cohort, each band from all of them. A UsageError when the runs measured nothing."""
    if k <= 0 or not 0 <= floor < 1:
        raise UsageError(f"k {k} and floor {floor}: k must be above 0, floor in [0, 1)")
    by_cohort: dict[str, _Samples] = {}
    made: list[MadeFrom] = []
    for index, (location, run) in enumerate(runs):
        placed = place_hosts(run, declarations, cohort_by or run.cohort_by)
        measured_hosts = 0
        for host, place in placed.items():
            outcome = run.hosts[host]
            measured = host_measured(run, outcome)
            if not measured:
                continue
            measured_hosts += 1
            samples = by_cohort.setdefault(place.cohort, _Samples(place))
            samples.hosts.add(host)
            samples.runs.add(index)
            for software, version in host_versions(outcome).items():
                if version is not None:
                    samples.versions[software].add(version)
            for key, value in measured.items():
                samples.values[key].append(value)
        made.append(
            MadeFrom(location, run.started, run.inventory, run.fleet_version, measured_hosts)
        )
    if not by_cohort:
        raise UsageError(
            "these runs measured nothing a baseline keeps (allreduce, its matrix, fabric pairs)",
            hint="make it from runs of `fleet probe` with the allreduce probe, or `fleet fabric`",
        )
    merged = _merge_inferred(by_cohort)
    cohorts = {name: _cohort(name, samples, k, floor) for name, samples in merged.items()}
    return Baseline(fleet_version, created, k, floor, cohort_by, tuple(made), cohorts)


def _merge_inferred(by_cohort: dict[str, _Samples]) -> dict[str, _Samples]:
    """Hosts placed by their allreduce's GPU model and count join the one cohort of those GPUs
    that a run with a gpu probe named, when there is exactly one."""
    known = {n: s for n, s in by_cohort.items() if not s.placed.inferred}
    merged = dict(known)
    for name, samples in by_cohort.items():
        if not samples.placed.inferred:
            continue
        gpu = samples.placed.gpu
        alike = [s for s in known.values() if s.placed.gpu and gpu and same_gpus(s.placed.gpu, gpu)]
        if len(alike) != 1:
            merged[name] = samples
            continue
        into = alike[0]
        into.hosts |= samples.hosts
        into.runs |= samples.runs
        for software, versions in samples.versions.items():
            into.versions[software] |= versions
        for key, figures in samples.values.items():
            into.values[key] += figures
    return merged


def _cohort(name: str, samples: _Samples, k: float, floor: float) -> BaselineCohort:
    return BaselineCohort(
        name=name,
        label=samples.placed.label,
        gpu=samples.placed.gpu,
        hosts=tuple(sorted(samples.hosts)),
        runs=len(samples.runs),
        versions={v: tuple(sorted(samples.versions.get(v, ()))) for v in VERSIONS},
        bands={key: make_band(values, k, floor) for key, values in sorted(samples.values.items())},
    )
