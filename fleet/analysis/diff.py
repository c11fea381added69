"""Cross-host diff: what is not the same on every host, and who the odd hosts are. Pure.

Three kinds of comparison (fleet/analysis/facts.py says which fact is which):
  - plain values: hosts grouped by value, the majority value and the outliers;
  - name sets (dir() dumps, arch lists): item by item against the majority ("_SymmetricMemory
    missing on gpu-[07-08]"), not two unreadable lists;
  - measurements (allreduce latency, busbw): within cohorts (same GPU model, count, interconnect)
    against the cohort median, slow outliers flagged with their factor.
Hosts that were not reached or lack a probe are listed as such, never silently dropped.

A majority is what fleet.analysis.majority says (more hosts than any other value); when values
tie the fact is *split* and no host is odd for it. A probe that did not succeed on some hosts is a
cause: the facts that differ only because of it (named after it, splitting those hosts from the
rest) are folded under its `_status.<probe>` divergence instead of listed one by one.

Work is done once per distinct payload: hosts whose facts are identical (the usual case in a big
fleet) share one flattened copy, so a 1,000-host diff costs little more than a 10-host one.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.analysis.facts import (
    FactCache,
    HostFacts,
    ProbeFacts,
    Value,
    length_path,
    median,
    probe_of,
    slowness,
)
from fleet.analysis.majority import rank
from fleet.models import NOT_REACHED, HostOutcome

DEFAULT_TOLERANCE = 0.25
COLLAPSE_AT = 4


@dataclass(frozen=True)
class Divergence:
    """A plain value that differs: hosts grouped by value, most hosts first. When `split`, no
    value leads (a 1–1 split of two hosts): `majority` is only the first of the tied values."""

    fact: str
    majority: Value
    majority_hosts: tuple[str, ...]
    others: tuple[tuple[Value, tuple[str, ...]], ...]
    split: bool = False
    consequences: tuple[
        str, ...
    ] = ()  # facts folded under this one (a probe's status): its effects

    @property
    def differing_hosts(self) -> tuple[str, ...]:
        """The odd hosts: those not on the majority value (none when split)."""
        if self.split:
            return ()
        return tuple(sorted(h for _, hosts in self.others for h in hosts))

    @property
    def groups(self) -> tuple[tuple[Value, tuple[str, ...]], ...]:
        return ((self.majority, self.majority_hosts), *self.others)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted(h for _, hosts in self.groups for h in hosts))


@dataclass(frozen=True)
class SetDivergence:
    """A name set that differs: items of the majority missing somewhere, items only some have."""

    fact: str
    hosts: tuple[str, ...]  # every host that reported the set
    missing: tuple[tuple[str, tuple[str, ...]], ...]  # (item, hosts without it)
    extra: tuple[tuple[str, tuple[str, ...]], ...]  # (item, the few hosts with it)
    split: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (item, hosts with it): half have it

    @property
    def differing_hosts(self) -> tuple[str, ...]:
        hosts = {h for _, hs in self.missing for h in hs} | {h for _, hs in self.extra for h in hs}
        return tuple(sorted(hosts))

    def holders(self) -> Iterator[tuple[str, frozenset[str]]]:
        """Each item that differs, with the hosts that have it."""
        everyone = frozenset(self.hosts)
        for item, without in self.missing:
            yield item, everyone - set(without)
        for item, having in (*self.extra, *self.split):
            yield item, frozenset(having)


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
    values, sets = fold_consequences(groups.value_divergences(), groups.set_divergences())
    return FleetDiff(
        hosts=tuple(o.name for o in outcomes),
        values=tuple(values),
        sets=tuple(sets),
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
        probe = probe_of(path)
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
    ranking = rank(by_value)
    (majority, majority_hosts), *others = ranking.groups
    return Divergence(path, majority, majority_hosts, tuple(others), split=ranking.split)


def _set_divergence(path: str, sets: Mapping[frozenset[str], tuple[str, ...]]) -> SetDivergence:
    """Per item, the majority rule over "has it" and "lacks it": missing on the few, extra on the
    few, or split (as many hosts have it as lack it)."""
    hosts = tuple(sorted(h for hs in sets.values() for h in hs))
    presence: Counter[str] = Counter()
    for items, members in sets.items():
        for item in items:
            presence[item] += len(members)
    missing, extra, split = [], [], []
    for item in sorted(presence):
        if presence[item] == len(hosts):
            continue
        holders = tuple(sorted(h for s, hs in sets.items() if item in s for h in hs))
        lacking = tuple(sorted(set(hosts) - set(holders)))
        ranking = rank({True: holders, False: lacking})
        if ranking.split:
            split.append((item, holders))
        elif ranking.groups[0][0]:
            missing.append((item, lacking))
        else:
            extra.append((item, holders))
    return SetDivergence(path, hosts, tuple(missing), tuple(extra), tuple(split))


# ------------------------------------------------------------------------------ consequences

WORD = re.compile(r"[A-Za-z0-9]+")


def fold_consequences(
    values: list[Divergence], sets: list[SetDivergence]
) -> tuple[list[Divergence], list[SetDivergence]]:
    """Fold under each probe's `_status.<probe>` divergence the facts that differ because of it:
    facts named after the probe (`dir.modules."torch.distributed".names` for torch) whose hosts
    split exactly into those where the probe succeeded (all alike) and those where it did not."""
    for cause in [d for d in values if d.fact.startswith("_status.")]:
        probe = probe_of(cause.fact)
        down = frozenset(h for value, hosts in cause.groups if value != "ok" for h in hosts)
        up = frozenset(cause.hosts) - down
        if not down or not up:
            continue
        folded_values = [d for d in values if d is not cause and _follows(d, probe, down, up)]
        folded_sets = [d for d in sets if _set_follows(d, probe, up)]
        if not folded_values and not folded_sets:
            continue
        names = tuple(sorted([d.fact for d in folded_values] + [d.fact for d in folded_sets]))
        values = [dataclasses.replace(d, consequences=names) if d is cause else d for d in values]
        values = [d for d in values if d not in folded_values]
        sets = [d for d in sets if d not in folded_sets]
    return values, sets


def _named_after(fact: str, probe: str) -> bool:
    return probe_of(fact) == probe or probe in WORD.findall(fact)


def _follows(item: Divergence, probe: str, down: frozenset[str], up: frozenset[str]) -> bool:
    if not _named_after(item.fact, probe):
        return False
    sides = [frozenset(hosts) for _, hosts in item.groups]
    ok_sides = [side for side in sides if side & up]
    return len(ok_sides) == 1 and not ok_sides[0] & down


def _set_follows(item: SetDivergence, probe: str, up: frozenset[str]) -> bool:
    if not _named_after(item.fact, probe):
        return False
    up_here = up & set(item.hosts)  # the hosts where the probe succeeded must all agree
    return bool(up_here) and all(
        holders & up_here in (frozenset(), up_here) for _, holders in item.holders()
    )


# ------------------------------------------------------------------------------ measurements


def cohort_name(facts: HostFacts) -> str:
    values = facts.values
    model = values.get("gpu.gpus[0].name")
    if model is None:
        return "no GPU data"
    count = values.get("gpu.gpu_count", values.get(length_path("gpu.gpus"), "?"))
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


DEVICE_INDEX = re.compile(r'\[\d+\]|\."(?:GPU|NIC|mlx5_)?\d+"|\.(?:GPU|NIC)\d+')


def shape(path: str) -> str:
    """`gpu.gpus[3].name` → `gpu.gpus[*].name`; `torch.p2p_access."5"."7"` → `….*.*` (JMESPath
    wildcards: the shape is an expression a rule can use too)."""
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
