"""Blame: which host or link makes the fabric slow or broken. Pure.

Each pair's busbw (at the largest size) is compared with the median of all measured pairs. A pair
is bad when it failed, summed wrongly, or is slower than the median by more than the tolerance.
  - a host that is bad with most of its partners (at least two measured) is a suspect host;
  - a bad pair whose hosts are both fine with some other partner is a suspect link;
  - a bad pair that neither explains (each host met only this partner) is a suspect pair: one of
    the two or the link between them (`--pairs all` tells which);
  - a host that could not be reached is a suspect host, with the reason.
Imbue's host_validation counts failures per host over random pair rounds the same way.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.fabric.results import GroupResult

# a pair this much slower than the median pair is bad: fleet's one default (fleet.models)
from fleet.models import DEFAULT_TOLERANCE as DEFAULT_TOLERANCE

MEASURED = ("ok", "failed", "timeout")  # statuses that say something about the hosts


@dataclass(frozen=True)
class Suspect:
    kind: str  # host | link | pair
    hosts: tuple[str, ...]
    reason: str
    factor: float | None = None  # median / busbw: how many times slower than the fleet

    def to_dict(self) -> dict[str, Any]:
        # JSON has no infinity (json.dumps would write the invalid `Infinity`): a pair that moved
        # nothing has no finite factor, so the document says null and `reason` says why.
        finite = self.factor is not None and math.isfinite(self.factor)
        factor = round(self.factor, 2) if finite and self.factor is not None else None
        return {
            "kind": self.kind,
            "hosts": list(self.hosts),
            "reason": self.reason,
            "factor": factor,
        }


def median_busbw(pairs: Sequence[GroupResult]) -> float | None:
    values = [p.busbw_gbps for p in pairs if p.status == "ok" and p.busbw_gbps]
    return float(statistics.median(values)) if values else None


def times_slower(pair: GroupResult, median: float | None) -> float | None:
    """How many times slower than the median the pair ran: median busbw / the pair's busbw.

    Zero busbw is infinitely slow (inf): a pair that measured and moved nothing is the strongest
    evidence against its link, so it must fail any tolerance. None when there is nothing to
    compare: no busbw (the pair did not measure) or no median (zero or None: no pair measured).
    Not fleet.analysis.facts.slowness (any measure, against a cohort's median or an older run),
    which calls a zero on either side no difference (1.0), so a zero there is never flagged."""
    if pair.busbw_gbps is None or not median:
        return None
    return median / pair.busbw_gbps if pair.busbw_gbps > 0 else float("inf")


def why_bad(pair: GroupResult, median: float | None, tolerance: float) -> str | None:
    """Why this pair is bad, or None when it is fine (or says nothing: skipped)."""
    if pair.status not in MEASURED:
        return None
    if pair.status != "ok":
        return f"{pair.status}: {pair.error}"
    if pair.correct is False:
        return "wrong sums"
    factor = times_slower(pair, median)
    if factor is not None and factor > 1 + tolerance:
        return f"{pair.busbw_gbps:.3g} GB/s, {factor:.1f}× below the median {median:.3g} GB/s"
    return None


def blame(
    pairs: Sequence[GroupResult],
    unreached: Mapping[str, str],
    tolerance: float = DEFAULT_TOLERANCE,
) -> list[Suspect]:
    """The suspects, hosts first, then links and undecided pairs."""
    median = median_busbw(pairs)
    bad = {frozenset(p.hosts): why for p in pairs if (why := why_bad(p, median, tolerance))}
    suspects = [Suspect("host", (h,), f"not reached: {r}") for h, r in unreached.items()]
    hosts = suspect_hosts(pairs, bad)
    suspects += [Suspect("host", (h,), text) for h, text in hosts.items()]
    for pair in pairs:
        if frozenset(pair.hosts) in bad and not set(pair.hosts) & set(hosts):
            suspects.append(_pair_suspect(pair, pairs, bad, median))
    return suspects


def suspect_hosts(
    pairs: Sequence[GroupResult], bad: Mapping[frozenset[str], str]
) -> dict[str, str]:
    """Hosts bad with most of their partners (at least two measured pairs)."""
    found = {}
    for host in sorted({h for p in pairs for h in p.hosts}):
        mine = [p for p in pairs if host in p.hosts and p.status in MEASURED]
        partners = [
            other for p in mine if frozenset(p.hosts) in bad for other in p.hosts if other != host
        ]
        if len(mine) >= 2 and len(partners) * 2 > len(mine):
            found[host] = f"bad with {len(partners)} of {len(mine)} partners: {', '.join(partners)}"
    return found


def _pair_suspect(
    pair: GroupResult,
    pairs: Sequence[GroupResult],
    bad: Mapping[frozenset[str], str],
    median: float | None,
) -> Suspect:
    fine_elsewhere = all(_good_elsewhere(h, pair, pairs, bad) for h in pair.hosts)
    kind = "link" if fine_elsewhere else "pair"
    tail = "; both hosts are fine with other partners" if fine_elsewhere else ""
    return Suspect(kind, pair.hosts, bad[frozenset(pair.hosts)] + tail, times_slower(pair, median))


def _good_elsewhere(
    host: str, pair: GroupResult, pairs: Sequence[GroupResult], bad: Mapping[frozenset[str], str]
) -> bool:
    return any(
        host in p.hosts and p is not pair and p.status == "ok" and frozenset(p.hosts) not in bad
        for p in pairs
    )
