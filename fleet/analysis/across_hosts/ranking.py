"""The findings of a diff, folded and ranked (fleet/analysis/across_hosts/findings.py says what each rank is):
`analyse` splits each differing fact by cohort (fleet/analysis/across_hosts/cohort_split.py), takes the
check-grade findings first (fleet/analysis/across_hosts/check_grade.py), then folds what is left. Pure.

  - rank 2, `cohort`: the other divergences inside a cohort, those setting the same hosts apart
    (or splitting the cohort the same way) together;
  - rank 3, `software`: software and API facts that differ between cohorts, those splitting the
    cohorts alike together;
  - rank 4, `hardware`: one finding per pair of cohorts, counting the hardware facts that differ
    between them, as expected of unlike machines.

Findings are ordered by rank, then kind (arch, nccl, import), then cohort, most hosts first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from fleet.analysis.across_hosts.check_grade import CheckGrade, differs_on_arch
from fleet.analysis.across_hosts.cohort_split import FactGroupsLike, Splitter, joined
from fleet.analysis.across_hosts.cohorts import Cohort
from fleet.analysis.across_hosts.divergence import Divergence, Pair, SetDivergence
from fleet.analysis.across_hosts.findings import (
    COHORT,
    HARDWARE,
    KIND_ORDER,
    SOFTWARE,
    Analysis,
    CrossCohort,
    DivergenceFinding,
    fact_names,
)


def analyse(
    values: Sequence[Divergence],
    sets: Sequence[SetDivergence],
    cohorts: Sequence[Cohort],
    groups: FactGroupsLike,
) -> Analysis:
    splitter = Splitter(cohorts, groups)
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
    builder = FindingBuilder(splitter)
    findings = builder.build(inside, crosses, differs_on_arch(values, sets))
    return Analysis(tuple(tagged_values), tuple(tagged_sets), tuple(findings))


class FindingBuilder:
    """The findings of one diff: the check-grade ones, then the rest folded."""

    def __init__(self, splitter: Splitter) -> None:
        self.splitter = splitter
        self.labels = splitter.labels
        self.check_grade = CheckGrade(splitter)

    def build(
        self,
        inside: list[tuple[str, Divergence | SetDivergence]],
        crosses: list[CrossCohort],
        arch_differs: bool,
    ) -> list[DivergenceFinding]:
        findings: list[DivergenceFinding] = []
        if arch_differs:
            arch, inside, crosses = self.check_grade.arch_findings(inside, crosses)
            findings += arch
        nccl, inside, crosses = self.check_grade.keyed_findings(inside, crosses, "nccl")
        imports, inside, crosses = self.check_grade.keyed_findings(inside, crosses, "import")
        findings += nccl + imports
        findings += self.cohort_findings(inside)
        findings += self.software_findings([c for c in crosses if c.software])
        findings += self.hardware_findings(crosses)
        return sorted(findings, key=self._order)

    def _order(self, finding: DivergenceFinding) -> tuple[Any, ...]:
        kind = KIND_ORDER.index(finding.kind) if finding.kind in KIND_ORDER else 0
        where = self.splitter.order.get(finding.cohort or "", -1)
        return (finding.rank, kind, where, -len(finding.hosts), finding.facts)

    # ------------------------------------------------------------------ the rest, folded

    def cohort_findings(
        self, inside: list[tuple[str, Divergence | SetDivergence]]
    ) -> list[DivergenceFinding]:
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
                DivergenceFinding("cohort", COHORT, title, hosts, cohort, fact_names(values, names, []),
                        tuple(values), tuple(names))
            )  # fmt: skip
        return findings

    def software_findings(self, crosses: list[CrossCohort]) -> list[DivergenceFinding]:
        """Software and API facts that differ between cohorts, those splitting them alike together."""
        alike: dict[tuple[tuple[str, ...], ...], list[CrossCohort]] = defaultdict(list)
        for cross in crosses:
            alike[cross.partition].append(cross)
        findings = []
        for partition, items in alike.items():
            names = [self.labels[c] for side in partition for c in side]
            title = f"{len(items)} software fact(s) differ between {joined(names)}"
            hosts = self.splitter.minority_hosts(items[0])
            findings.append(
                DivergenceFinding("software", SOFTWARE, title, hosts, None, fact_names([], [], items),
                        across=tuple(sorted(items, key=lambda x: x.fact)))
            )  # fmt: skip
        return findings

    def hardware_findings(self, crosses: list[CrossCohort]) -> list[DivergenceFinding]:
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
                DivergenceFinding("hardware", HARDWARE, title, (), None, fact_names([], [], items),
                        across=tuple(sorted(items, key=lambda x: x.fact)), pair=pair)
            )  # fmt: skip
        order = self.splitter.order
        return sorted(findings, key=lambda f: tuple(order[c] for c in f.pair or ()))


def _all_hosts(item: Divergence | SetDivergence) -> tuple[str, ...]:
    return tuple(sorted(item.hosts))
