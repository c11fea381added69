"""Cross-host diff: what is not the same on every host, and who the odd hosts are. Pure.

Three kinds of comparison (fleet/analysis/facts.py says which fact is which):
  - plain values: hosts grouped by value, the majority value and the outliers;
  - name sets (dir() dumps, arch lists): item by item against the majority ("_SymmetricMemory
    missing on gpu-[07-08]"), not two unreadable lists;
  - measurements (allreduce latency, busbw): within cohorts (same GPU model, count, interconnect)
    against the cohort median, slow outliers flagged with their factor.
Hosts that were not reached or lack a probe are listed as such, never silently dropped.

Work is done once per distinct payload: hosts whose facts are identical (the usual case in a big
fleet) share one flattened copy, so a 1,000-host diff costs little more than a 10-host one.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.analysis.facts import FactCache, HostFacts, ProbeFacts, Value, median, slowness
from fleet.models import NOT_REACHED, HostOutcome

DEFAULT_TOLERANCE = 0.25
COLLAPSE_AT = 4


@dataclass(frozen=True)
class Divergence:
    """A plain value that differs: hosts grouped by value, most hosts first."""

    fact: str
    majority: Value
    majority_hosts: tuple[str, ...]
    others: tuple[tuple[Value, tuple[str, ...]], ...]

    @property
    def differing_hosts(self) -> tuple[str, ...]:
        return tuple(sorted(h for _, hosts in self.others for h in hosts))


@dataclass(frozen=True)
class SetDivergence:
    """A name set that differs: items of the majority missing somewhere, items only some have."""

    fact: str
    hosts: tuple[str, ...]  # every host that reported the set
    missing: tuple[tuple[str, tuple[str, ...]], ...]  # (item, hosts without it)
    extra: tuple[tuple[str, tuple[str, ...]], ...]  # (item, the few hosts with it)

    @property
    def differing_hosts(self) -> tuple[str, ...]:
        hosts = {h for _, hs in self.missing for h in hs} | {h for _, hs in self.extra for h in hs}
        return tuple(sorted(hosts))


@dataclass(frozen=True)
class Cohort:
    name: str  # "2× NVIDIA H200 · nvlink"
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class Outlier:
    measure: str
    host: str
    value: float
    median: float
    factor: float  # how many times worse than the cohort median
    cohort: str


@dataclass(frozen=True)
class Unreported:
    host: str
    probe: str | None  # None: the whole host
    status: str
    reason: str


@dataclass(frozen=True)
class FleetDiff:
    hosts: tuple[str, ...]
    values: tuple[Divergence, ...]
    sets: tuple[SetDivergence, ...]
    cohorts: tuple[Cohort, ...]
    outliers: tuple[Outlier, ...]
    unreported: tuple[Unreported, ...]
    tolerance: float

    @property
    def odd_hosts(self) -> tuple[str, ...]:
        odd = {h for item in self.values for h in item.differing_hosts}
        odd |= {h for item in self.sets for h in item.differing_hosts}
        odd |= {o.host for o in self.outliers}
        return tuple(sorted(odd))

    @property
    def clean(self) -> bool:
        return not (self.values or self.sets or self.outliers)


# --------------------------------------------------------------------------------- comparing


def compare_hosts(
    outcomes: Iterable[HostOutcome],
    declarations: Mapping[str, ProbeFacts],
    tolerance: float = DEFAULT_TOLERANCE,
) -> FleetDiff:
    outcomes = list(outcomes)
    reporting = [o for o in outcomes if o.status not in NOT_REACHED and o.probes]
    groups = FactGroups(reporting, declarations)
    cohorts = find_cohorts(reporting, groups)
    return FleetDiff(
        hosts=tuple(o.name for o in outcomes),
        values=tuple(groups.value_divergences()),
        sets=tuple(groups.set_divergences()),
        cohorts=tuple(cohorts),
        outliers=tuple(measure_outliers(groups, cohorts, tolerance)),
        unreported=tuple(unreported(outcomes)),
        tolerance=tolerance,
    )


class FactGroups:
    """Hosts grouped by identical facts: comparisons run once per distinct group."""

    def __init__(
        self, outcomes: Sequence[HostOutcome], declarations: Mapping[str, ProbeFacts]
    ) -> None:
        self.ran_ok: dict[str, set[str]] = {}
        self.measures: dict[str, dict[str, float]] = {}
        members: dict[Any, list[str]] = defaultdict(list)
        self.facts_of: dict[Any, HostFacts] = {}
        cache = FactCache(declarations)
        for outcome in outcomes:
            key, facts = self._signature(outcome, cache)
            members[key].append(outcome.name)
            self.facts_of.setdefault(key, facts)
            self.ran_ok[outcome.name] = {p for p, r in outcome.probes.items() if r.status == "ok"}
        self.members = {k: tuple(v) for k, v in members.items()}

    def _signature(self, outcome: HostOutcome, cache: FactCache) -> tuple[Any, HostFacts]:
        parts = []
        merged = HostFacts()
        for probe, result in sorted(outcome.probes.items()):
            part_key, facts = cache.part(probe, result)
            parts.append(part_key)
            merged.values.update(facts.values)
            merged.sets.update(facts.sets)
            self.measures.setdefault(outcome.name, {}).update(facts.measures)
        return tuple(parts), merged

    def _reporters(self, path: str, field: str) -> dict[Any, tuple[str, ...]]:
        """group key → its hosts, for groups that report `path` or whose probe ran fine without it."""
        probe = path.split(".", 1)[0].split("[", 1)[0]
        found = {}
        for key, hosts in self.members.items():
            if path in getattr(self.facts_of[key], field) or probe in self.ran_ok[hosts[0]]:
                found[key] = hosts
        return found

    def paths(self, field: str) -> list[str]:
        return sorted({p for facts in self.facts_of.values() for p in getattr(facts, field)})

    def value_divergences(self) -> list[Divergence]:
        found = []
        for path in self.paths("values"):
            by_value: dict[Value, list[str]] = defaultdict(list)
            for key, hosts in self._reporters(path, "values").items():
                by_value[self.facts_of[key].values.get(path)].extend(hosts)
            if len(by_value) > 1:
                found.append(_divergence(path, by_value))
        return found

    def set_divergences(self) -> list[SetDivergence]:
        found = []
        for path in self.paths("sets"):
            by_set: dict[frozenset[str], list[str]] = defaultdict(list)
            for key, hosts in self.members.items():
                if path in self.facts_of[key].sets:
                    by_set[self.facts_of[key].sets[path]].extend(hosts)
            if len(by_set) > 1:
                found.append(_set_divergence(path, {s: tuple(h) for s, h in by_set.items()}))
        return found


def _divergence(path: str, by_value: Mapping[Value, list[str]]) -> Divergence:
    # most hosts first; ties broken by the value's text so the output is stable
    ranked = sorted(by_value, key=lambda v: (-len(by_value[v]), repr(v)))
    groups = [(v, tuple(sorted(by_value[v]))) for v in ranked]
    (majority, majority_hosts), *others = groups
    return Divergence(path, majority, majority_hosts, tuple(others))


def _set_divergence(path: str, sets: Mapping[frozenset[str], tuple[str, ...]]) -> SetDivergence:
    hosts = tuple(sorted(h for hs in sets.values() for h in hs))
    presence: Counter[str] = Counter()
    for items, members in sets.items():
        for item in items:
            presence[item] += len(members)
    majority_items = {i for i, n in presence.items() if n * 2 > len(hosts)}
    missing, extra = [], []
    for item in sorted(presence):
        holders = tuple(sorted(h for s, hs in sets.items() if item in s for h in hs))
        if item in majority_items and len(holders) < len(hosts):
            missing.append((item, tuple(sorted(set(hosts) - set(holders)))))
        elif item not in majority_items:
            extra.append((item, holders))
    return SetDivergence(path, hosts, tuple(missing), tuple(extra))


# ------------------------------------------------------------------------------ measurements


def cohort_name(facts: HostFacts) -> str:
    values = facts.values
    model = values.get("gpu.gpus[0].name")
    if model is None:
        return "no GPU data"
    count = values.get("gpu.gpu_count", values.get("gpu.gpus.len", "?"))
    return f"{count}× {model} · {values.get('gpu.interconnect', '?')}"


def find_cohorts(outcomes: Sequence[HostOutcome], groups: FactGroups) -> list[Cohort]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for key, hosts in groups.members.items():
        by_name[cohort_name(groups.facts_of[key])].extend(hosts)
    return [Cohort(name, tuple(sorted(hosts))) for name, hosts in sorted(by_name.items())]


def measure_outliers(
    groups: FactGroups, cohorts: Sequence[Cohort], tolerance: float
) -> list[Outlier]:
    found = []
    for cohort in cohorts:
        measures = {h: groups.measures.get(h, {}) for h in cohort.hosts}
        for name in sorted({m for values in measures.values() for m in values}):
            values = {h: v[name] for h, v in measures.items() if name in v}
            if len(values) < 2:
                continue  # alone in its cohort: nothing to compare with
            middle = median(list(values.values()))
            for host, value in sorted(values.items()):
                factor = slowness(name, value, middle)
                if factor > 1 + tolerance:
                    found.append(Outlier(name, host, value, middle, round(factor, 2), cohort.name))
    return found


def unreported(outcomes: Sequence[HostOutcome]) -> list[Unreported]:
    """Hosts not compared at all, and probes that did not report on some host."""
    found = []
    for outcome in outcomes:
        if outcome.status in NOT_REACHED or not outcome.probes:
            found.append(Unreported(outcome.name, None, outcome.status, outcome.error or ""))
            continue
        for probe, result in outcome.probes.items():
            if result.status != "ok":
                found.append(Unreported(outcome.name, probe, result.status, result.error or ""))
    return found


# ----------------------------------------------------------------------------- presentation


@dataclass(frozen=True)
class DivergenceGroup:
    """The same fact across devices (`gpu.gpus[*].mig_mode`, `torch.p2p_access[*][*]`) splitting
    the hosts the same way: one block instead of one per GPU or GPU pair. When every item has the
    same values (`uniform`), the block shows them; otherwise only which hosts differ."""

    parent: str
    items: tuple[Divergence, ...]

    @property
    def uniform(self) -> bool:
        first = self.items[0]
        return all((d.majority, d.others) == (first.majority, first.others) for d in self.items)

    @property
    def differing_hosts(self) -> tuple[str, ...]:
        return tuple(sorted({h for item in self.items for h in item.differing_hosts}))


DEVICE_INDEX = re.compile(r'\[\d+\]|\["?(?:GPU|NIC|mlx5_)?\d+"?\]|\.(?:GPU|NIC)\d+')


def shape(path: str) -> str:
    """`gpu.gpus[3].name` → `gpu.gpus[*].name`; `torch.p2p_access["5"]["7"]` → `…[*][*]`."""
    return DEVICE_INDEX.sub(lambda m: ".*" if m.group(0).startswith(".") else "[*]", path)


def group_divergences(divergences: Iterable[Divergence]) -> list[Divergence | DivergenceGroup]:
    """Collapse facts that differ only in a device index: ≥ 2 with the very same values, or
    ≥ COLLAPSE_AT that at least split the hosts alike. Widest impact first."""
    same_values: dict[tuple[str, Any], list[Divergence]] = defaultdict(list)
    for item in divergences:
        same_values[(shape(item.fact), (item.majority, item.majority_hosts, item.others))].append(
            item
        )
    shown: list[Divergence | DivergenceGroup] = []
    same_split: dict[tuple[str, Any], list[Divergence]] = defaultdict(list)
    for (parent, _), items in same_values.items():
        if len(items) >= 2:
            shown.append(DivergenceGroup(parent, tuple(items)))
            continue
        item = items[0]
        split = frozenset([item.majority_hosts, *(hosts for _, hosts in item.others)])
        same_split[(parent, split)].append(item)
    for (parent, _), items in same_split.items():
        if len(items) >= COLLAPSE_AT:
            shown.append(DivergenceGroup(parent, tuple(items)))
        else:
            shown.extend(items)
    return sorted(
        shown,
        key=lambda d: (-len(d.differing_hosts), d.fact if isinstance(d, Divergence) else d.parent),
    )


def list_delta(majority: Value, other: Value, limit: int = 6) -> str | None:
    """For lists of names: `+added −removed` relative to the majority (not for nested lists)."""
    if not isinstance(majority, tuple) or not isinstance(other, tuple):
        return None
    if any(isinstance(v, tuple) for v in (*majority, *other)):
        return None
    added = [str(v) for v in other if v not in set(majority)]
    removed = [str(v) for v in majority if v not in set(other)]
    parts = [f"+{v}" for v in added[:limit]] + [f"−{v}" for v in removed[:limit]]
    hidden = max(0, len(added) - limit) + max(0, len(removed) - limit)
    if not parts:
        return "same items, other order"
    return " ".join(parts) + (f" (+{hidden} more)" if hidden else "")
