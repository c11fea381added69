"""Each differing fact of a diff split by cohort (fleet/analysis/across_hosts/cohorts.py), for the findings
(fleet/analysis/across_hosts/findings.py): the divergence inside each cohort whose hosts disagree, the
comparison between cohorts each taken at its own majority value, and the tags the fact carries
(`within`, `between`, `hardware`). Pure.

A fact differs between two cohorts *as hardware* when the probes declare it a hardware fact, or
when it is a per-device fact (`torch.devices[3]…`, `nics."mlx5_2"…`) of a device one of the two
cohorts does not have. The splitter also holds the cohorts as the finders read them: their hosts
and short labels.

Work is per fact and per group of alike hosts (a dictionary lookup each), never per pair of hosts;
host lists are built only for a cohort whose hosts disagree.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol, TypeVar

from fleet.analysis.across_hosts.cohorts import Cohort, cohort_of_hosts
from fleet.analysis.across_hosts.divergence import (
    Divergence,
    SetDivergence,
    divergence_of,
    set_divergence_of,
)
from fleet.analysis.across_hosts.findings import CrossCohort
from fleet.analysis.facts import HostFacts, Value

_Tagged = TypeVar("_Tagged", Divergence, SetDivergence)

DEVICE_INDEX = re.compile(r'\[\d+\]|\."(?:GPU|NIC|mlx5_)?\d+"|\.(?:GPU|NIC)\d+')


class _Split:
    """A cohort whose hosts tie on a fact: it has no value of its own to compare."""

    def __repr__(self) -> str:
        return "SPLIT"


SPLIT: Any = _Split()


class FactGroupsLike(Protocol):
    """What the findings read of fleet.analysis.across_hosts.diff.FactGroups: the hosts grouped by identical
    facts, each group's facts, which facts are hardware (and, optionally, `reported`: for each
    differing value, every reporting group's value)."""

    @property
    def members(self) -> Mapping[Any, tuple[str, ...]]: ...
    @property
    def facts_of(self) -> Mapping[Any, HostFacts]: ...
    @property
    def hardware(self) -> AbstractSet[str]: ...


class Splitter:
    """Splits each differing fact by cohort: the in-cohort divergences and the cross-cohort
    comparison, with the tags the fact carries."""

    def __init__(self, cohorts: Sequence[Cohort], groups: FactGroupsLike) -> None:
        self.cohorts = list(cohorts)
        self.order = {c.name: i for i, c in enumerate(self.cohorts)}
        self.size = {c.name: len(c.hosts) for c in self.cohorts}
        self.cohort_of = cohort_of_hosts(self.cohorts)
        self.labels = {c.name: c.short for c in self.cohorts}
        self.hosts_of = {c.name: c.hosts for c in self.cohorts}
        self.members = groups.members
        self.facts_of = groups.facts_of
        self.reported = getattr(groups, "reported", {})
        self.hardware = frozenset(groups.hardware)
        self.keys_of: dict[str, list[Any]] = defaultdict(list)
        self.cohort_of_key: dict[Any, str | None] = {}  # None: its hosts are in several cohorts
        for key, hosts in self.members.items():
            names = {self.cohort_of[h] for h in hosts if h in self.cohort_of}
            for name in names:
                self.keys_of[name].append(key)
            self.cohort_of_key[key] = next(iter(names)) if len(names) == 1 else None
        self._present: dict[tuple[str, str], bool] = {}

    def present(self, path: str, cohort: str) -> bool:
        """Whether any host of the cohort reports the fact (a device it has)."""
        found = self._present.get((path, cohort))
        if found is None:
            found = any(
                path in self.facts_of[k].values or path in self.facts_of[k].sets
                for k in self.keys_of[cohort]
            )
            self._present[(path, cohort)] = found
        return found

    def split_value(
        self, item: Divergence
    ) -> tuple[Divergence, dict[str, Divergence], CrossCohort | None]:
        inside: dict[str, Divergence] = {}
        typical: dict[str, Value] = {}
        for cohort, by_value in self._per_cohort(item).items():
            if len(by_value) == 1:
                typical[cohort] = next(iter(by_value))
                continue
            restricted = divergence_of(item.fact, by_value)
            inside[cohort] = dataclasses.replace(restricted, consequences=item.consequences)
            typical[cohort] = SPLIT if restricted.split else restricted.majority
        cross = self._cross(item.fact, typical, names=False)
        return self._tagged(item, inside, cross), inside, cross

    def _per_cohort(self, item: Divergence) -> dict[str, dict[Value, list[str]]]:
        """Per cohort, its hosts by value: group by group when the diff kept the groups'
        values (the host lists are only built for a cohort whose hosts disagree)."""
        per: dict[str, dict[Value, list[Any]]] = defaultdict(lambda: defaultdict(list))
        by_key = self.reported.get(item.fact)
        if by_key is None or any(self.cohort_of_key.get(k) is None for k in by_key):
            for value, hosts in item.groups:
                for host in hosts:
                    per[self.cohort_of[host]][value].append(host)
            return per
        for key, value in by_key.items():
            per[self.cohort_of_key[key]][value].append(key)  # type: ignore[index]
        members = self.members
        return {
            cohort: (
                by_value
                if len(by_value) == 1
                else {v: [h for k in keys for h in members[k]] for v, keys in by_value.items()}
            )
            for cohort, by_value in per.items()
        }

    def split_set(
        self, item: SetDivergence
    ) -> tuple[SetDivergence, dict[str, SetDivergence], CrossCohort | None]:
        per: dict[str, dict[frozenset[str], list[str]]] = defaultdict(lambda: defaultdict(list))
        for key, hosts in self.members.items():
            found = self.facts_of[key].sets.get(item.fact)
            if found is None:
                continue
            cohort = self.cohort_of_key.get(key)
            if cohort is not None:
                per[cohort][found].extend(hosts)
                continue
            for host in hosts:
                per[self.cohort_of[host]][found].append(host)
        inside: dict[str, SetDivergence] = {}
        typical: dict[str, Value] = {}
        for cohort, by_set in per.items():
            if len(by_set) > 1:
                inside[cohort] = set_divergence_of(item.fact, by_set)
            typical[cohort] = _typical_set(by_set)
        cross = self._cross(item.fact, typical, names=True)
        return self._tagged(item, inside, cross), inside, cross

    def _tagged(
        self, item: _Tagged, inside: Mapping[str, Any], cross: CrossCohort | None
    ) -> _Tagged:
        """`item` with the cohorts it splits inside, the pairs of cohorts it differs between,
        and whether it is only the cohorts' own hardware (they differ, none splits inside)."""
        return dataclasses.replace(
            item,
            within=self._ordered(inside),
            between=cross.pairs if cross else (),
            hardware=cross is not None and not inside and not cross.software,
        )

    def _ordered(self, cohorts: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(cohorts, key=self.order.__getitem__))

    def _cross(self, fact: str, typical: Mapping[str, Value], names: bool) -> CrossCohort | None:
        compared = [c for c in self._ordered(typical) if typical[c] is not SPLIT]
        by_value: dict[Value, list[str]] = defaultdict(list)
        for cohort in compared:
            by_value[typical[cohort]].append(cohort)
        if len(by_value) < 2:
            return None
        pairs = tuple(
            (a, b)
            for i, a in enumerate(compared)
            for b in compared[i + 1 :]
            if typical[a] != typical[b]
        )
        declared = fact in self.hardware
        device = DEVICE_INDEX.search(fact) is not None
        hardware = tuple(
            (a, b)
            for a, b in pairs
            if declared or (device and not (self.present(fact, a) and self.present(fact, b)))
        )
        weight = {value: sum(self.size[c] for c in cs) for value, cs in by_value.items()}
        ranked = sorted(by_value.items(), key=lambda kv: (-weight[kv[0]], self.order[kv[1][0]]))
        groups = tuple((value, tuple(cs)) for value, cs in ranked)
        return CrossCohort(fact, groups, pairs, hardware, names)

    def minority_hosts(self, cross: CrossCohort) -> tuple[str, ...]:
        """The hosts of every cohort not on the value of the most hosts."""
        return tuple(sorted(h for _, cs in cross.groups[1:] for c in cs for h in self.hosts_of[c]))

    def cohort_list(self, names: Iterable[str]) -> str:
        """Cohorts by their labels: `2× H200, 8× A100 and no GPU`."""
        return joined([self.labels[n] for n in names])


def _typical_set(by_set: Mapping[frozenset[str], list[str]]) -> Value:
    """A cohort's names: those most of its hosts have; SPLIT when half have a name."""
    total = sum(len(hosts) for hosts in by_set.values())
    if len(by_set) == 1:
        return tuple(sorted(next(iter(by_set))))
    count: dict[str, int] = defaultdict(int)
    for items, hosts in by_set.items():
        for item in items:
            count[item] += len(hosts)
    if any(2 * n == total for n in count.values()):
        return SPLIT
    return tuple(sorted(item for item, n in count.items() if 2 * n > total))


def joined(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
