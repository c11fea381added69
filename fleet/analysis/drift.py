"""Drift between two runs: per host, what changed since the baseline. Pure.

Version changes (`torch.version 2.9.1 → 2.11.0`), names added to or removed from dir() dumps and
arch lists, NCCL settings, interconnect, host and probe status, measurements beyond tolerance, and
hosts that appeared or vanished. Changes shared by many hosts are reported once, with the hosts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleet.analysis.diff import DEFAULT_TOLERANCE
from fleet.analysis.facts import FactCache, HostFacts, ProbeFacts, Value, slowness
from fleet.models import HostOutcome, Run


@dataclass(frozen=True)
class Change:
    """One fact that changed the same way on `hosts`."""

    fact: str
    kind: str  # "value" | "added" | "removed" (set items) | "measure" | "status"
    old: Value
    new: Value
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class Drift:
    old_started: str
    new_started: str
    added_hosts: tuple[str, ...]
    removed_hosts: tuple[str, ...]
    changes: tuple[Change, ...]
    tolerance: float

    @property
    def found(self) -> bool:
        return bool(self.added_hosts or self.removed_hosts or self.changes)

    @property
    def changed_hosts(self) -> tuple[str, ...]:
        return tuple(sorted({h for c in self.changes for h in c.hosts}))


def compare_runs(
    old: Run, new: Run, declarations: Mapping[str, ProbeFacts], tolerance: float = DEFAULT_TOLERANCE
) -> Drift:
    cache = FactCache(declarations)
    common = [h for h in new.hosts if h in old.hosts]
    per_host: dict[tuple[str, str, Value, Value], list[str]] = defaultdict(list)
    for host in common:
        for change in host_changes(old.hosts[host], new.hosts[host], cache, tolerance):
            per_host[change].append(host)
    changes = [
        Change(fact, kind, a, b, tuple(sorted(hosts)))
        for (fact, kind, a, b), hosts in per_host.items()
    ]
    return Drift(
        old_started=old.started,
        new_started=new.started,
        added_hosts=tuple(sorted(set(new.hosts) - set(old.hosts))),
        removed_hosts=tuple(sorted(set(old.hosts) - set(new.hosts))),
        changes=tuple(sorted(changes, key=lambda c: (-len(c.hosts), c.fact, c.kind))),
        tolerance=tolerance,
    )


def host_changes(
    old: HostOutcome, new: HostOutcome, cache: FactCache, tolerance: float
) -> Iterable[tuple[str, str, Value, Value]]:
    if old.status != new.status:
        yield ("host.status", "status", old.status, new.status)
    ran_both = _probes_ok(old) & _probes_ok(new)
    for probe in sorted(set(old.probes) | set(new.probes)):
        before = _part(cache, probe, old)
        after = _part(cache, probe, new)
        if before[0] is None or before[0] != after[0]:  # equal content: nothing changed there
            yield from _value_changes(before[1], after[1], ran_both)
            yield from _set_changes(before[1], after[1])
        yield from _measure_changes(before[1], after[1], tolerance)


def _part(cache: FactCache, probe: str, outcome: HostOutcome) -> tuple[int | None, HostFacts]:
    if probe not in outcome.probes:
        return None, HostFacts()
    return cache.part(probe, outcome.probes[probe])


def _probes_ok(outcome: HostOutcome) -> set[str]:
    return {p for p, r in outcome.probes.items() if r.status == "ok"}


def _value_changes(
    before: HostFacts, after: HostFacts, ran_both: set[str]
) -> Iterable[tuple[str, str, Value, Value]]:
    for path in sorted(set(before.values) | set(after.values)):
        probe = path.split(".", 1)[0].split("[", 1)[0]
        if path not in before.values and path not in after.values:
            continue
        one_sided = path not in before.values or path not in after.values
        if one_sided and probe not in ran_both and path != f"{probe}.status":
            continue  # the probe did not run on one side: its .status change says so
        old, new = before.values.get(path), after.values.get(path)
        if old != new:
            yield (path, "value", old, new)


def _set_changes(before: HostFacts, after: HostFacts) -> Iterable[tuple[str, str, Value, Value]]:
    for path in sorted(set(before.sets) & set(after.sets)):
        for item in sorted(after.sets[path] - before.sets[path]):
            yield (path, "added", None, item)
        for item in sorted(before.sets[path] - after.sets[path]):
            yield (path, "removed", item, None)


def _measure_changes(
    before: HostFacts, after: HostFacts, tolerance: float
) -> Iterable[tuple[str, str, Value, Value]]:
    for name in sorted(set(before.measures) & set(after.measures)):
        old, new = before.measures[name], after.measures[name]
        worse, better = slowness(name, new, old), slowness(name, old, new)
        if worse > 1 + tolerance or better > 1 + tolerance:
            yield (name, "measure", old, new)
