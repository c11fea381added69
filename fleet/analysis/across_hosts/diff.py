"""Cross-host diff: what is not the same on every host, and who the odd hosts are. Pure.

Three kinds of comparison (fleet/analysis/facts.py says which fact is which):
  - plain values: hosts grouped by value, the majority value and the outliers;
  - name sets (dir() dumps, arch lists): item by item against the majority ("_SymmetricMemory
    missing on gpu-[07-08]"), not two unreadable lists;
  - measurements (allreduce latency, busbw): within cohorts (same GPU model, count, interconnect)
    against the cohort median, slow outliers flagged with their factor.
Hosts that were not reached or lack a probe are listed as such, never silently dropped.

Hosts are grouped into cohorts (fleet/analysis/across_hosts/cohorts.py: GPU model × count × interconnect, or
`cohort_by`), and the differing facts are read per cohort and ranked into findings
(fleet/analysis/across_hosts/findings.py; fleet/analysis/across_hosts/ranking.py ranks them): what differs inside a cohort,
and software that differs between cohorts, before the hardware differences unlike machines are
expected to have.

A majority is what fleet.analysis.across_hosts.majority says (more hosts than any other value); when values
tie the fact is *split* and no host is odd for it. A probe that did not succeed on some hosts is a
cause: the facts that differ only because of it (named after it, splitting those hosts from the
rest) are folded under its `_status.<probe>` divergence instead of listed one by one.

Work is done once per distinct payload: hosts whose facts are identical (the usual case in a big
fleet) share one flattened copy, so a 1,000-host diff costs little more than a 10-host one.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.analysis.across_hosts.cohorts import Cohort as Cohort
from fleet.analysis.across_hosts.cohorts import cohort_name as cohort_name
from fleet.analysis.across_hosts.cohorts import find_cohorts
from fleet.analysis.across_hosts.divergence import Divergence as Divergence
from fleet.analysis.across_hosts.divergence import Pair as Pair
from fleet.analysis.across_hosts.divergence import SetDivergence as SetDivergence
from fleet.analysis.across_hosts.divergence import divergence_of, set_divergence_of
from fleet.analysis.across_hosts.findings import CHECK, COHORT
from fleet.analysis.across_hosts.findings import CrossCohort as CrossCohort
from fleet.analysis.across_hosts.findings import DivergenceFinding as DivergenceFinding
from fleet.analysis.across_hosts.ranking import analyse
from fleet.analysis.across_runs.tolerance import DEFAULT_TOLERANCE as DEFAULT_TOLERANCE
from fleet.analysis.classes import FactCache, shared_or_own
from fleet.analysis.facts import HostFacts, ProbeFacts, Value, median, probe_of, slowness
from fleet.models import NOT_REACHED, HostOutcome

COLLAPSE_AT = 4


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
    """`values` and `sets`: every fact that differs anywhere, each tagged with the cohorts it
    differs within and the pairs of cohorts it differs between; `findings`: the same facts read
    per cohort, most serious first (fleet/analysis/across_hosts/findings.py)."""

    hosts: tuple[str, ...]
    values: tuple[Divergence, ...]
    sets: tuple[SetDivergence, ...]
    cohorts: tuple[Cohort, ...]
    outliers: tuple[Outlier, ...]
    unreported: tuple[Unreported, ...]
    tolerance: float
    findings: tuple[DivergenceFinding, ...] = ()
    cohort_by: str | None = None  # the JMESPath that made the cohorts; None: the default key

    @property
    def odd_hosts(self) -> tuple[str, ...]:
        """Hosts unlike their own cohort (or check-grade), and slow ones; never a whole cohort
        only for being unlike another one."""
        odd = {h for finding in self.findings for h in finding.odd_hosts}
        odd |= {o.host for o in self.outliers}
        return tuple(sorted(odd))

    def ranked(self, *ranks: int) -> tuple[DivergenceFinding, ...]:
        return tuple(f for f in self.findings if f.rank in ranks)

    @property
    def in_cohorts(self) -> tuple[DivergenceFinding, ...]:
        """Check-grade findings and divergence inside cohorts (ranks 1 and 2)."""
        return self.ranked(CHECK, COHORT)

    @property
    def clean(self) -> bool:
        return not (self.values or self.sets or self.outliers)


# --------------------------------------------------------------------------------- comparing


def compare_hosts(
    outcomes: Iterable[HostOutcome],
    declarations: Mapping[str, ProbeFacts],
    tolerance: float = DEFAULT_TOLERANCE,
    cohort_by: str | None = None,
    cache: FactCache | None = None,
) -> FleetDiff:
    """The diff of `outcomes`; `cohort_by`: a JMESPath over each host's document naming its
    cohort (default: GPU model × GPU count × interconnect). A bad expression is a UsageError.
    `cache`: payloads already flattened (by `declarations`), shared with the rules' judging."""
    outcomes = list(outcomes)
    reporting = [o for o in outcomes if o.status not in NOT_REACHED and o.probes]
    groups = FactGroups(reporting, declarations, cache)
    cohorts = find_cohorts(reporting, groups.members, groups.facts_of, cohort_by)
    values, sets = fold_consequences(groups.value_divergences(), groups.set_divergences())
    analysis = analyse(values, sets, cohorts, groups)
    return FleetDiff(
        hosts=tuple(o.name for o in outcomes),
        values=analysis.values,
        sets=analysis.sets,
        cohorts=tuple(cohorts),
        outliers=tuple(measure_outliers(groups, cohorts, tolerance)),
        unreported=tuple(unreported(outcomes)),
        tolerance=tolerance,
        findings=analysis.findings,
        cohort_by=cohort_by or None,
    )


class FactGroups:
    """Hosts grouped by identical facts: comparisons run once per distinct group."""

    def __init__(
        self,
        outcomes: Sequence[HostOutcome],
        declarations: Mapping[str, ProbeFacts],
        cache: FactCache | None = None,
    ) -> None:
        self.ran_ok: dict[str, set[str]] = {}
        self.measures: dict[str, dict[str, float]] = {}
        members: dict[Any, list[str]] = defaultdict(list)
        self.facts_of: dict[Any, HostFacts] = {}
        cache = shared_or_own(cache, declarations)
        for outcome in outcomes:
            key, facts = self._signature(outcome, cache)
            members[key].append(outcome.name)
            self.facts_of.setdefault(key, facts)
            self.ran_ok[outcome.name] = {p for p, r in outcome.probes.items() if r.status == "ok"}
        self.members = {k: tuple(v) for k, v in members.items()}
        self._sorted: dict[tuple[Any, ...], tuple[str, ...]] = {}  # groups → their hosts, sorted
        self.hardware: set[str] = set().union(*(f.hardware for f in self.facts_of.values()))

    def _signature(self, outcome: HostOutcome, cache: FactCache) -> tuple[Any, HostFacts]:
        """The host's group key and facts; the facts are merged only for a group not seen yet."""
        parts = [
            (probe, *cache.part(probe, result)) for probe, result in sorted(outcome.probes.items())
        ]
        measures = self.measures.setdefault(outcome.name, {})
        for _, _, facts in parts:
            measures.update(facts.measures)
        key = tuple(part_key for _, part_key, _ in parts)
        known = self.facts_of.get(key)
        if known is not None:
            return key, known
        merged = HostFacts()
        for _, _, facts in parts:
            merged.values.update(facts.values)
            merged.sets.update(facts.sets)
            merged.hardware.update(facts.hardware)
        return key, merged

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
        """Each value that differs; `self.reported` keeps, for each, every reporting group's
        value (the findings split it by cohort group by group, not host by host)."""
        found = []
        self.reported: dict[str, dict[Any, Value]] = {}
        for path in self.paths("values"):
            by_value: dict[Value, list[Any]] = defaultdict(list)  # value → its groups' keys
            by_key = {}
            for key in self._reporters(path, "values"):
                value = by_key[key] = self.facts_of[key].values.get(path)
                by_value[value].append(key)
            if len(by_value) > 1:
                hosts = {value: self._sorted_hosts(tuple(keys)) for value, keys in by_value.items()}
                found.append(divergence_of(path, hosts, ordered=True))
                self.reported[path] = by_key
        return found

    def _sorted_hosts(self, keys: tuple[Any, ...]) -> tuple[str, ...]:
        """The hosts of the groups `keys`, sorted: the facts that differ split the hosts along
        the same few lines, so each such set of 20,000 names is sorted once, not per fact."""
        found = self._sorted.get(keys)
        if found is None:
            found = self._sorted[keys] = tuple(sorted(h for k in keys for h in self.members[k]))
        return found

    def set_divergences(self) -> list[SetDivergence]:
        found = []
        for path in self.paths("sets"):
            by_set: dict[frozenset[str], list[str]] = defaultdict(list)
            for key, hosts in self.members.items():
                if path in self.facts_of[key].sets:
                    by_set[self.facts_of[key].sets[path]].extend(hosts)
            if len(by_set) > 1:
                found.append(set_divergence_of(path, by_set))
        return found


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
            if result.status != "ok":  # one that cannot apply there says so as its rules do
                status = "n/a" if result.not_applicable else result.status
                found.append(Unreported(outcome.name, probe, status, result.error or ""))
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
