"""Findings: the cross-host diff read per cohort and ranked, so that on a mixed fleet the problem
is the first thing said, not line 181 of what differs between unlike machines. Pure. This module is
their model: the ranks, a finding, and a fact compared between cohorts.

Every differing fact is split by cohort (fleet/analysis/across_hosts/cohort_split.py):
  - *within* a cohort (hosts of one kind disagree): always a finding;
  - *between* cohorts (each cohort alike, the cohorts unlike): a finding when the fact is software
    or an API (versions, import fallbacks, dir() names, NCCL settings: the same code has to run on
    every cohort); summarised, one block per pair of cohorts, when it follows from the hardware
    (the probes' "hardware" facts, and per-device facts of devices one cohort does not have).

Findings, most serious first:
  rank 1  check-grade: a torch that cannot run on its GPUs (the arch list lacks their sm_XY), NCCL
          transport settings that differ (P2P, SHM, IB, NET, ALGO, PROTO, SOCKET_IFNAME), an import
          that resolves to another name: kinds `arch`, `nccl`, `import`
          (fleet/analysis/across_hosts/check_grade.py);
  rank 2  other divergence inside a cohort, the facts that set the same hosts apart together:
          kind `cohort`;
  rank 3  software and API facts that differ between cohorts, those splitting the cohorts alike
          together: kind `software`;
  rank 4  hardware facts that differ between two cohorts, as expected: one finding per pair,
          kind `hardware` (`fleet diff RUN --between` lists the facts).
Ranks 2 to 4, and the order of them all, are fleet/analysis/across_hosts/ranking.py's (`analyse`).
Nothing is dropped: each differing fact is tagged with the cohorts it differs within and the pairs
of cohorts it differs between, and is accounted for by at least one finding.

Work is per fact and per host (a dictionary lookup each), never per pair of hosts: a 1,000-host
mixed fleet costs about ten times a 100-host one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fleet.analysis.across_hosts.divergence import Divergence, Pair, SetDivergence
from fleet.analysis.facts import Value

CHECK, COHORT, SOFTWARE, HARDWARE = 1, 2, 3, 4
KIND_ORDER = ("arch", "nccl", "import")


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

    @property
    def partition(self) -> tuple[tuple[str, ...], ...]:
        """The cohorts grouped by their value, most hosts first."""
        return tuple(cohorts for _, cohorts in self.groups)


@dataclass(frozen=True)
class DivergenceFinding:
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
    findings: tuple[DivergenceFinding, ...]


def fact_names(
    values: Iterable[Divergence], sets: Iterable[SetDivergence], across: Iterable[CrossCohort]
) -> tuple[str, ...]:
    """A finding's `facts`: the facts of its items, each once, in order."""
    return tuple(dict.fromkeys([*(i.fact for i in values), *(i.fact for i in sets),
                                *(x.fact for x in across)]))  # fmt: skip
