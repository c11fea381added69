"""What differs, fact by fact: a plain value hosts disagree on, or a name set they disagree on
item by item. Pure; the cross-host diff (fleet/analysis/across_hosts/diff.py) and the findings built from it
(fleet/analysis/across_hosts/findings.py) share these.

Each differing fact carries where it differs: `within` the cohorts whose hosts disagree on it, and
`between` the pairs of cohorts whose (majority) values differ; `hardware` when every such pair
differs only as unlike machines do (fleet/analysis/facts.py: the probes' "hardware" facts).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

from fleet.analysis.across_hosts.majority import rank
from fleet.analysis.facts import Value

Pair = tuple[str, str]  # two cohorts' names, in the run's cohort order


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
    within: tuple[str, ...] = ()  # the cohorts whose hosts disagree on it
    between: tuple[Pair, ...] = ()  # the pairs of cohorts whose values differ
    hardware: bool = False  # it differs between cohorts only as unlike machines do

    @cached_property
    def differing_hosts(self) -> tuple[str, ...]:
        """The odd hosts: those not on the majority value (none when split). Read many times
        by the renderers: worked out once (its fields do not change)."""
        if self.split:
            return ()
        return tuple(sorted(chain.from_iterable(hosts for _, hosts in self.others)))

    @property
    def groups(self) -> tuple[tuple[Value, tuple[str, ...]], ...]:
        return ((self.majority, self.majority_hosts), *self.others)

    @cached_property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted(chain.from_iterable(hosts for _, hosts in self.groups)))


@dataclass(frozen=True)
class SetDivergence:
    """A name set that differs: items of the majority missing somewhere, items only some have."""

    fact: str
    hosts: tuple[str, ...]  # every host that reported the set
    missing: tuple[tuple[str, tuple[str, ...]], ...]  # (item, hosts without it)
    extra: tuple[tuple[str, tuple[str, ...]], ...]  # (item, the few hosts with it)
    split: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (item, hosts with it): half have it
    within: tuple[str, ...] = ()
    between: tuple[Pair, ...] = ()
    hardware: bool = False

    @cached_property
    def differing_hosts(self) -> tuple[str, ...]:
        """The hosts missing an item or with an extra one (worked out once: its fields do not
        change; the set made in C, a host tuple at a time)."""
        return tuple(sorted(set().union(*(hs for _, hs in (*self.missing, *self.extra)))))

    def holders(self) -> Iterator[tuple[str, frozenset[str]]]:
        """Each item that differs, with the hosts that have it."""
        everyone = frozenset(self.hosts)
        for item, without in self.missing:
            yield item, everyone - set(without)
        for item, having in (*self.extra, *self.split):
            yield item, frozenset(having)


def divergence_of(
    path: str, by_value: Mapping[Value, Iterable[str]], ordered: bool = False
) -> Divergence:
    """Hosts grouped by value (≥ 2 values) as a Divergence, by the one majority rule
    (`ordered`: each value's hosts come sorted)."""
    ranking = rank(by_value, ordered=ordered)
    (majority, majority_hosts), *others = ranking.groups
    return Divergence(path, majority, majority_hosts, tuple(others), split=ranking.split)


def set_divergence_of(path: str, sets: Mapping[frozenset[str], Iterable[str]]) -> SetDivergence:
    """Per item, the majority rule over "has it" and "lacks it": missing on the few, extra on the
    few, or split (as many hosts have it as lack it). Items held by the same distinct sets have
    the same holders: those are sorted and ranked once, not once per item."""
    members = [(items, tuple(hosts)) for items, hosts in sets.items()]
    hosts = tuple(sorted(h for _, hs in members for h in hs))
    held_by: dict[str, list[int]] = {}  # item → the distinct sets that hold it
    for number, (items, _) in enumerate(members):
        for item in items:
            held_by.setdefault(item, []).append(number)
    everyone = set(hosts)
    verdicts: dict[tuple[int, ...], tuple[str, tuple[str, ...]]] = {}
    missing, extra, split = [], [], []
    for item in sorted(held_by):
        pattern = tuple(held_by[item])
        verdict = verdicts.get(pattern)
        if verdict is None:
            verdict = verdicts[pattern] = _set_verdict(pattern, members, hosts, everyone)
        kind, listed = verdict
        if kind == "missing":
            missing.append((item, listed))
        elif kind == "extra":
            extra.append((item, listed))
        elif kind == "split":
            split.append((item, listed))
    return SetDivergence(path, hosts, tuple(missing), tuple(extra), tuple(split))


def _set_verdict(
    pattern: tuple[int, ...],
    members: list[tuple[frozenset[str], tuple[str, ...]]],
    hosts: tuple[str, ...],
    everyone: set[str],
) -> tuple[str, tuple[str, ...]]:
    """(missing | extra | split | same, the hosts listed) for an item the sets `pattern` hold."""
    holders = tuple(sorted(h for number in pattern for h in members[number][1]))
    if len(holders) == len(hosts):
        return "same", ()
    lacking = tuple(sorted(everyone - set(holders)))
    ranking = rank({True: holders, False: lacking})
    if ranking.split:
        return "split", holders
    if ranking.groups[0][0]:
        return "missing", lacking
    return "extra", holders
