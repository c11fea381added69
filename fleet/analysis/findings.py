"""Findings: the cross-host diff read per cohort and ranked, so that on a mixed fleet the problem
is the first thing said, not line 181 of what differs between unlike machines. Pure.

Every differing fact is split by cohort (fleet/analysis/cohorts.py):
  - *within* a cohort (hosts of one kind disagree): always a finding;
  - *between* cohorts (each cohort alike, the cohorts unlike): a finding when the fact is software
    or an API (versions, import fallbacks, dir() names, NCCL settings: the same code has to run on
    every cohort); summarised, one block per pair of cohorts, when it follows from the hardware
    (the probes' "hardware" facts, and per-device facts of devices one cohort does not have).

Findings, most serious first:
  rank 1  check-grade: a torch that cannot run on its GPUs (the arch list lacks their sm_XY), NCCL
          transport settings that differ (P2P, SHM, IB, NET, ALGO, PROTO, SOCKET_IFNAME), an import
          that resolves to another name: kinds `arch`, `nccl`, `import`;
  rank 2  other divergence inside a cohort, the facts that set the same hosts apart together:
          kind `cohort`;
  rank 3  software and API facts that differ between cohorts, those splitting the cohorts alike
          together: kind `software`;
  rank 4  hardware facts that differ between two cohorts, as expected: one finding per pair,
          kind `hardware` (`fleet diff RUN --between` lists the facts).
Nothing is dropped: each differing fact is tagged with the cohorts it differs within and the pairs
of cohorts it differs between, and is accounted for by at least one finding.

Work is per fact and per host (a dictionary lookup each), never per pair of hosts: a 1,000-host
mixed fleet costs about ten times a 100-host one.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Protocol

from fleet.analysis.cohorts import Cohort, cohort_of_hosts
from fleet.analysis.divergence import (
    Divergence,
    Pair,
    SetDivergence,
    divergence_of,
    set_divergence_of,
)
from fleet.analysis.facts import HostFacts, Value
from fleet.hostsets import compact_hosts

CHECK, COHORT, SOFTWARE, HARDWARE = 1, 2, 3, 4
KIND_ORDER = ("arch", "nccl", "import")

ARCH_FACT = re.compile(
    r"^torch\.(?:arch_list|devices\[\d+\]\.(?:arch_supported|arch_matched|ptx_fallback))$"
)
NCCL_TRANSPORT = re.compile(
    r'^nccl\.(?P<source>env|conf_files\."[^"]*")\.'
    r"(?P<key>NCCL_(?:P2P_\w+|SHM_\w+|IB_\w+|NET\w*|ALGO|PROTO|SOCKET_IFNAME))$"
)
IMPORT_RESOLVED = re.compile(r"^imports\.results\.(?P<spec>.+)\.resolved$")
DEVICE_INDEX = re.compile(r'\[\d+\]|\."(?:GPU|NIC|mlx5_)?\d+"|\.(?:GPU|NIC)\d+')


class _Split:
    """A cohort whose hosts tie on a fact: it has no value of its own to compare."""

    def __repr__(self) -> str:
        return "SPLIT"


SPLIT: Any = _Split()


@dataclass(frozen=True)
class CrossCohort:
    """A fact on which cohorts differ, each cohort taken at its own majority value (a cohort
    split on it is left out here: its hosts disagree, which is a finding of its own). For a name
    set, each value is the cohort's sorted names."""

    fact: str
    groups: tuple[tuple[Value, tuple[str, ...]], ...]  # value → the cohorts on it, most hosts first
    pairs: tuple[Pair, ...]  # the pairs of cohorts whose values differ
    hardware: tuple[Pair, ...]  # those that differ as unlike machines do
    names: bool = False  # a name set (dir() dump, arch list)

    @property
    def software(self) -> tuple[Pair, ...]:
        return tuple(p for p in self.pairs if p not in self.hardware)


@dataclass(frozen=True)
class Finding:
    """One thing to read: what (`title`, one line), where (`cohort`, None across cohorts) and
    on which hosts; `facts` the differing facts it accounts for, with their values restricted
    to the cohort (`values`, `sets`) or compared between cohorts (`across`)."""

    kind: str  # arch | nccl | import | cohort | software | hardware
    rank: int  # 1 check-grade, 2 inside a cohort, 3 software between cohorts, 4 hardware
    title: str
    hosts: tuple[str, ...]
    cohort: str | None
    facts: tuple[str, ...]
    values: tuple[Divergence, ...] = ()
    sets: tuple[SetDivergence, ...] = ()
    across: tuple[CrossCohort, ...] = ()
    pair: Pair | None = None  # kind hardware: the two cohorts

    @property
    def odd_hosts(self) -> tuple[str, ...]:
        """The hosts this finding holds against the others: a torch that cannot run on its
        GPUs, hosts unlike the rest of their cohort, cohorts unlike the fleet on a check-grade
        setting; none for a split (no majority) and for what differs between cohorts only."""
        if self.kind == "arch":
            return self.hosts
        if self.rank in (CHECK, COHORT) and (self.values or self.sets):
            odd = {h for item in self.values for h in item.differing_hosts}
            odd |= {h for names in self.sets for h in names.differing_hosts}
            return tuple(sorted(odd))
        return self.hosts if self.rank == CHECK else ()


@dataclass(frozen=True)
class Analysis:
    values: tuple[Divergence, ...]  # the run's differing values, tagged
    sets: tuple[SetDivergence, ...]
    findings: tuple[Finding, ...]


# ------------------------------------------------------------------------------- splitting


class Splitter:
    """Splits each differing fact by cohort: the in-cohort divergences and the cross-cohort
    comparison, with the tags the fact carries."""

    def __init__(self, cohorts: Sequence[Cohort], groups: FactGroupsLike) -> None:
        self.cohorts = list(cohorts)
        self.order = {c.name: i for i, c in enumerate(self.cohorts)}
        self.size = {c.name: len(c.hosts) for c in self.cohorts}
        self.cohort_of = cohort_of_hosts(self.cohorts)
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
        tagged = dataclasses.replace(
            item,
            within=self._ordered(inside),
            between=cross.pairs if cross else (),
            hardware=cross is not None and not inside and not cross.software,
        )
        return tagged, inside, cross

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
        tagged = dataclasses.replace(
            item,
            within=self._ordered(inside),
            between=cross.pairs if cross else (),
            hardware=cross is not None and not inside and not cross.software,
        )
        return tagged, inside, cross

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


# ------------------------------------------------------------------------------- findings


class FactGroupsLike(Protocol):
    """What the findings read of fleet.analysis.diff.FactGroups: the hosts grouped by identical
    facts, each group's facts, which facts are hardware (and, optionally, `reported`: for each
    differing value, every reporting group's value)."""

    @property
    def members(self) -> Mapping[Any, tuple[str, ...]]: ...
    @property
    def facts_of(self) -> Mapping[Any, HostFacts]: ...
    @property
    def hardware(self) -> AbstractSet[str]: ...


def analyse(
    values: Sequence[Divergence],
    sets: Sequence[SetDivergence],
    cohorts: Sequence[Cohort],
    groups: FactGroupsLike,
) -> Analysis:
    splitter = Splitter(cohorts, groups)
    labels = {c.name: c.short for c in cohorts}
    inside: list[tuple[str, Divergence | SetDivergence]] = []
    crosses: list[CrossCohort] = []
    tagged_values, tagged_sets = [], []
    for value in values:
        tagged, found, cross = splitter.split_value(value)
        tagged_values.append(tagged)
        inside += list(found.items())
        crosses += [cross] if cross else []
    for names in sets:
        tagged_set, found_sets, cross = splitter.split_set(names)
        tagged_sets.append(tagged_set)
        inside += list(found_sets.items())
        crosses += [cross] if cross else []
    builder = FindingBuilder(splitter, labels)
    findings = builder.build(inside, crosses, _differs_on_arch(values, sets))
    return Analysis(tuple(tagged_values), tuple(tagged_sets), tuple(findings))


def _differs_on_arch(values: Sequence[Divergence], sets: Sequence[SetDivergence]) -> bool:
    return any(ARCH_FACT.match(i.fact) for i in values) or any(
        ARCH_FACT.match(s.fact) for s in sets
    )


class FindingBuilder:
    def __init__(self, splitter: Splitter, labels: Mapping[str, str]) -> None:
        self.splitter = splitter
        self.labels = labels
        self.hosts_of = {c.name: c.hosts for c in splitter.cohorts}

    def build(
        self,
        inside: list[tuple[str, Divergence | SetDivergence]],
        crosses: list[CrossCohort],
        arch_differs: bool,
    ) -> list[Finding]:
        findings: list[Finding] = []
        if arch_differs:
            arch, inside, crosses = self.arch_findings(inside, crosses)
            findings += arch
        nccl, inside, crosses = self.keyed_findings(inside, crosses, "nccl")
        imports, inside, crosses = self.keyed_findings(inside, crosses, "import")
        findings += nccl + imports
        findings += self.cohort_findings(inside)
        findings += self.software_findings([c for c in crosses if c.software])
        findings += self.hardware_findings(crosses)
        return sorted(findings, key=self._order)

    def _order(self, finding: Finding) -> tuple[Any, ...]:
        kind = KIND_ORDER.index(finding.kind) if finding.kind in KIND_ORDER else 0
        where = self.splitter.order.get(finding.cohort or "", -1)
        return (finding.rank, kind, where, -len(finding.hosts), finding.facts)

    # ------------------------------------------------------------------------ check-grade

    def arch_findings(
        self, inside: list[tuple[str, Divergence | SetDivergence]], crosses: list[CrossCohort]
    ) -> tuple[list[Finding], list[tuple[str, Divergence | SetDivergence]], list[CrossCohort]]:
        """Hosts whose torch has no kernels for their GPUs, by cohort, torch and missing sm_XY."""
        splitter = self.splitter
        bad: dict[tuple[str, Any, tuple[str, ...]], list[str]] = defaultdict(list)
        for key, hosts in splitter.members.items():
            missing = unsupported_arches(splitter.facts_of[key])
            if not missing:
                continue
            version = splitter.facts_of[key].values.get("torch.version")
            for host in hosts:
                if host in splitter.cohort_of:
                    bad[(splitter.cohort_of[host], version, missing)].append(host)
        bad_in: dict[str, set[str]] = defaultdict(set)
        for (where, _, _), members in bad.items():
            bad_in[where].update(members)
        whole = {c for c, hosts in bad_in.items() if len(hosts) == len(self.hosts_of[c])}
        covered = [
            (c, item)
            for c, item in inside
            if ARCH_FACT.match(item.fact) and set(item.differing_hosts) <= bad_in.get(c, set())
        ]
        covered_across = [
            x
            for x in crosses
            if ARCH_FACT.match(x.fact) and any(c in whole for pair in x.pairs for c in pair)
        ]
        findings = []
        for (cohort, version, missing), bad_hosts in bad.items():
            values = [i for c, i in covered if c == cohort and isinstance(i, Divergence)]
            names = [i for c, i in covered if c == cohort and isinstance(i, SetDivergence)]
            across = [x for x in covered_across if any(cohort in p for p in x.pairs)]
            facts = _facts(values, names, across)
            if not facts:
                continue  # the same on every host of the fleet: not a divergence
            torch = f"torch {version}" if version else "torch"
            title = (
                f"{torch} cannot run on its GPUs: its arch list lacks {', '.join(missing)} "
                f"({self.labels[cohort]})"
            )
            findings.append(
                Finding("arch", CHECK, title, tuple(sorted(bad_hosts)), cohort, facts,
                        tuple(values), tuple(names), tuple(across))
            )  # fmt: skip
        return findings, _without(inside, covered), [x for x in crosses if x not in covered_across]

    def keyed_findings(
        self,
        inside: list[tuple[str, Divergence | SetDivergence]],
        crosses: list[CrossCohort],
        kind: str,
    ) -> tuple[list[Finding], list[tuple[str, Divergence | SetDivergence]], list[CrossCohort]]:
        """NCCL transport settings (one finding per cohort and hosts, every key together) or
        import resolutions (one per spec)."""
        pattern = NCCL_TRANSPORT if kind == "nccl" else IMPORT_RESOLVED
        mine: list[tuple[str, Divergence | SetDivergence]] = [
            (c, i) for c, i in inside if isinstance(i, Divergence) and pattern.match(i.fact)
        ]
        alike: dict[tuple[Any, ...], list[Divergence]] = defaultdict(list)
        for cohort, item in mine:
            assert isinstance(item, Divergence)
            who = item.differing_hosts or item.hosts
            alike[(cohort, who, item.fact if kind == "import" else "")].append(item)
        findings = []
        for (cohort, who, _), items in alike.items():
            title = (
                self.nccl_title(items, cohort)
                if kind == "nccl"
                else self.import_title(items[0], cohort)
            )
            findings.append(
                Finding(kind, CHECK, title, who, cohort, _facts(items, [], []), tuple(items))
            )
        across = [x for x in crosses if pattern.match(x.fact) and x.software]
        together: dict[tuple[Any, ...], list[CrossCohort]] = defaultdict(list)
        for cross in across:
            together[(_partition(cross), cross.fact if kind == "import" else "")].append(cross)
        for (_, _), items_across in together.items():
            title = self.across_title(items_across, kind)
            hosts = self.minority_hosts(items_across[0])
            findings.append(
                Finding(kind, CHECK, title, hosts, None, _facts([], [], items_across),
                        across=tuple(items_across))
            )  # fmt: skip
        return findings, _without(inside, mine), [x for x in crosses if x not in across]

    def nccl_title(self, items: Sequence[Divergence], cohort: str) -> str:
        label = self.labels[cohort]
        if items[0].split:
            parts = [
                f"{setting_key(i.fact)} "
                + ", ".join(f"{_setting(v)} on {compact_hosts(h)}" for v, h in i.groups)
                for i in items
            ]
            return f"NCCL transport settings split {label}: {'; '.join(parts)}"
        odd = []
        for item in items:
            key = setting_key(item.fact)
            if len(item.others) == 1:
                odd.append(f"{key}={_setting(item.others[0][0])}")
            else:
                odd.append(
                    f"{key} "
                    + ", ".join(f"{_setting(v)} on {compact_hosts(h)}" for v, h in item.others)
                )
        rest = {item.majority for item in items}
        if rest == {None}:
            usual = "unset"
        else:
            usual = ", ".join(f"{setting_key(i.fact)}={_setting(i.majority)}" for i in items)
        return f"NCCL transport settings differ: {', '.join(odd)} (the rest of {label}: {usual})"

    def import_title(self, item: Divergence, cohort: str) -> str:
        spec = import_spec(item.fact)
        label = self.labels[cohort]
        if item.split:
            sides = ", ".join(f"{_resolved(spec, v)} on {compact_hosts(h)}" for v, h in item.groups)
            return f"{spec} resolves differently in {label}: {sides}"
        if len(item.others) == 1:
            odd = item.others[0][0]
            verb = "does not import" if odd is None else f"resolves to {_resolved(spec, odd)}"
        else:
            verb = "resolves to " + ", ".join(
                f"{_resolved(spec, v)} on {compact_hosts(h)}" for v, h in item.others
            )
        return f"{spec} {verb} (the rest of {label}: {_resolved(spec, item.majority)})"

    def across_title(self, items: Sequence[CrossCohort], kind: str) -> str:
        if kind == "import":
            spec = import_spec(items[0].fact)
            sides = "; ".join(
                f"{_resolved(spec, v)} on {self._cohorts(cs)}" for v, cs in items[0].groups
            )
            return f"{spec} resolves differently between cohorts: {sides}"
        parts = [
            f"{setting_key(x.fact)} "
            + "; ".join(f"{_setting(v)} on {self._cohorts(cs)}" for v, cs in x.groups)
            for x in items
        ]
        return f"NCCL transport settings differ between cohorts: {'; '.join(parts)}"

    def minority_hosts(self, cross: CrossCohort) -> tuple[str, ...]:
        """The hosts of every cohort not on the value of the most hosts."""
        return tuple(sorted(h for _, cs in cross.groups[1:] for c in cs for h in self.hosts_of[c]))

    def _cohorts(self, names: Iterable[str]) -> str:
        return _and([self.labels[n] for n in names])

    # ------------------------------------------------------------------ the rest, grouped

    def cohort_findings(
        self, inside: list[tuple[str, Divergence | SetDivergence]]
    ) -> list[Finding]:
        """The other in-cohort divergences, those setting the same hosts apart together."""
        alike: dict[tuple[str, tuple[str, ...], bool], list[Divergence | SetDivergence]] = (
            defaultdict(list)
        )
        for cohort, item in inside:
            odd = item.differing_hosts
            alike[(cohort, odd or _all_hosts(item), not odd)].append(item)
        findings = []
        for (cohort, hosts, split), items in alike.items():
            label = self.labels[cohort]
            count = f"{len(items)} fact(s)"
            title = (
                f"the hosts of {label} are split on {count}"
                if split
                else f"{count} differ from the rest of {label}"
            )
            values = sorted((i for i in items if isinstance(i, Divergence)), key=lambda i: i.fact)
            names = sorted((i for i in items if isinstance(i, SetDivergence)), key=lambda i: i.fact)
            findings.append(
                Finding("cohort", COHORT, title, hosts, cohort, _facts(values, names, []),
                        tuple(values), tuple(names))
            )  # fmt: skip
        return findings

    def software_findings(self, crosses: list[CrossCohort]) -> list[Finding]:
        """Software and API facts that differ between cohorts, those splitting them alike together."""
        alike: dict[tuple[tuple[str, ...], ...], list[CrossCohort]] = defaultdict(list)
        for cross in crosses:
            alike[_partition(cross)].append(cross)
        findings = []
        for partition, items in alike.items():
            names = [self.labels[c] for side in partition for c in side]
            title = f"{len(items)} software fact(s) differ between {_and(names)}"
            hosts = self.minority_hosts(items[0])
            findings.append(
                Finding("software", SOFTWARE, title, hosts, None, _facts([], [], items),
                        across=tuple(sorted(items, key=lambda x: x.fact)))
            )  # fmt: skip
        return findings

    def hardware_findings(self, crosses: list[CrossCohort]) -> list[Finding]:
        """One per pair of cohorts: how many hardware facts differ between them."""
        by_pair: dict[Pair, list[CrossCohort]] = defaultdict(list)
        for cross in crosses:
            for pair in cross.hardware:
                by_pair[pair].append(cross)
        findings = []
        for pair, items in by_pair.items():
            first, second = (self.labels[c] for c in pair)
            title = f"{first} vs {second}: {len(items)} hardware fact(s) differ, as expected"
            findings.append(
                Finding("hardware", HARDWARE, title, (), None, _facts([], [], items),
                        across=tuple(sorted(items, key=lambda x: x.fact)), pair=pair)
            )  # fmt: skip
        order = self.splitter.order
        return sorted(findings, key=lambda f: tuple(order[c] for c in f.pair or ()))


# ------------------------------------------------------------------------------- helpers


def unsupported_arches(facts: HostFacts) -> tuple[str, ...]:
    """The sm_XY of a host's GPUs that its torch has no kernels for (the torch probe's own
    judgement, `arch_supported`, which counts PTX it can JIT)."""
    values = facts.values
    count = values.get("length(torch.devices)")
    missing = set()
    for index in range(count if isinstance(count, int) else 0):
        if values.get(f"torch.devices[{index}].arch_supported") is False:
            capability = str(values.get(f"torch.devices[{index}].capability") or "?")
            missing.add("sm_" + capability.replace(".", ""))
    return tuple(sorted(missing))


def setting_key(fact: str) -> str:
    """`nccl.env.NCCL_ALGO` → `NCCL_ALGO`; a conf file's setting names the file."""
    found = NCCL_TRANSPORT.match(fact)
    if not found:
        return fact
    source = found.group("source")
    if source == "env":
        return found.group("key")
    return f"{found.group('key')} ({json.loads(source.removeprefix('conf_files.'))})"


def import_spec(fact: str) -> str:
    found = IMPORT_RESOLVED.match(fact)
    spec = found.group("spec") if found else fact
    return str(json.loads(spec)) if spec.startswith('"') else spec


def _resolved(spec: str, value: Value) -> str:
    """An import's resolved name, without the module the spec already names."""
    if value is None:
        return "nothing (it does not import)"
    module = spec.split(":", 1)[0] + ":"
    text = str(value)
    return text[len(module) :] if ":" in spec and text.startswith(module) else text


def _setting(value: Value) -> str:
    return "unset" if value is None else str(value)


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _partition(cross: CrossCohort) -> tuple[tuple[str, ...], ...]:
    return tuple(cohorts for _, cohorts in cross.groups)


def _all_hosts(item: Divergence | SetDivergence) -> tuple[str, ...]:
    return tuple(sorted(item.hosts))


def _facts(
    values: Iterable[Divergence], sets: Iterable[SetDivergence], across: Iterable[CrossCohort]
) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*(i.fact for i in values), *(i.fact for i in sets),
                                *(x.fact for x in across)]))  # fmt: skip


def _without(
    inside: list[tuple[str, Divergence | SetDivergence]],
    taken: list[tuple[str, Divergence | SetDivergence]],
) -> list[tuple[str, Divergence | SetDivergence]]:
    gone = {(c, id(i)) for c, i in taken}
    return [(c, i) for c, i in inside if (c, id(i)) not in gone]
