"""Drift between two runs: per host, what changed since the baseline. Pure.

Version changes (`torch.version 2.9.1 → 2.11.0`), names added to or removed from dir() dumps and
arch lists, NCCL settings, interconnect, host and probe status, measurements beyond tolerance, and
hosts that appeared or vanished. Changes shared by many hosts are reported once, with the hosts.

Like with like: only probes both runs ran are compared (a probe left out of one run with `-p` is
named in `probes_only_old`/`probes_only_new`, never a change), only hosts both runs selected (a
run narrowed by --limit records it: the hosts it did not select are `left_out`, not gone), and
when the runs come from different inventories the hosts only one of them has are listed but are
not drift.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.analysis.across_hosts.diff import DEFAULT_TOLERANCE
from fleet.analysis.classes import FactCache, shared_or_own
from fleet.analysis.facts import HostFacts, ProbeFacts, Value, probe_of, slowness, status_path
from fleet.hostsets import compact_hosts
from fleet.inventory.fleet_yaml import select_names
from fleet.models import HostOutcome, ProbeResult, Run
from fleet.store import source_words

HOST_STATUS = "_host.status"  # the name rules read it by


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
    old_inventory: str | None = None
    new_inventory: str | None = None
    probes_only_old: tuple[str, ...] = ()  # not compared: the new run did not run them
    probes_only_new: tuple[str, ...] = ()
    # hosts not compared: one run did not select them (its --limit), or the diff's --limit
    left_out: tuple[str, ...] = ()
    left_out_why: str = ""
    # why the old run is the one `--baseline latest` means, when it is not simply the latest
    # (newer runs of fewer hosts or probes passed over); "" when it is, or was named
    baseline_chosen: str = ""

    @property
    def same_inventory(self) -> bool:
        return self.old_inventory == self.new_inventory

    @property
    def found(self) -> bool:
        """Something changed on a host both runs probed, or (same inventory only) a host came or
        went. Runs of different inventories differ in hosts by design: that is not drift."""
        moved = self.same_inventory and bool(self.added_hosts or self.removed_hosts)
        return moved or bool(self.changes)

    @property
    def comparable(self) -> bool:
        """Like with like: the same inventory, the same probes, every host compared. "No drift"
        is a clean verdict only then; otherwise it holds among what both runs compare."""
        return not self.unlike and not self.left_out

    @property
    def unlike(self) -> list[str]:
        """What makes the two runs not like with like, one sentence each (empty: comparable)."""
        notes = []
        if not self.same_inventory:
            notes.append(
                f"the runs are of different inventories ({source_words(self.old_inventory)} → "
                f"{source_words(self.new_inventory)}): hosts in only one of them are not drift"
            )
        if self.probes_only_old:
            notes.append(f"not compared, not run in the new run: {', '.join(self.probes_only_old)}")
        if self.probes_only_new:
            notes.append(f"not compared, not run in the old run: {', '.join(self.probes_only_new)}")
        return notes

    @property
    def left_out_note(self) -> str:
        """Which hosts were not compared because a run did not select them, and why ("" if none)."""
        if not self.left_out:
            return ""
        return (
            f"compared only the hosts both runs selected; left out, not selected by "
            f"{self.left_out_why}: {compact_hosts(self.left_out)}"
        )

    @property
    def changed_hosts(self) -> tuple[str, ...]:
        return tuple(sorted({h for c in self.changes for h in c.hosts}))


def compare_runs(
    old: Run,
    new: Run,
    declarations: Mapping[str, ProbeFacts],
    tolerance: float = DEFAULT_TOLERANCE,
    limit: str | None = None,
    cache: FactCache | None = None,
) -> Drift:
    """What changed between `old` and `new` on the hosts both runs selected: a host that one run
    did not select (its --limit) is left out, not new or gone; `limit` (--limit syntax over host
    names) narrows both runs further. `cache`: payloads already flattened (the new run's, by
    the cross-host diff), used where its declarations are these."""
    cache = shared_or_own(cache, declarations)
    cache.read_as_edits(new.payload_edits)
    cache.read_as_edits(old.payload_edits)
    old_hosts, new_hosts, left_out, why = selected_by_both(old, new, limit)
    common = [h for h in new.hosts if h in old_hosts and h in new_hosts]
    old_probes, new_probes = probes_run(old), probes_run(new)
    both = old_probes & new_probes
    per_host: dict[tuple[str, str, Value, Value], list[str]] = defaultdict(list)
    compared: dict[tuple[Any, ...], tuple[Change_, ...]] = {}  # per distinct pair of payloads
    for host in common:
        found = host_changes(old.hosts[host], new.hosts[host], cache, tolerance, both, compared)
        for change in found:
            per_host[change].append(host)
    changes = [
        Change(fact, kind, a, b, tuple(sorted(hosts)))
        for (fact, kind, a, b), hosts in per_host.items()
    ]
    return Drift(
        old_started=old.started,
        new_started=new.started,
        added_hosts=tuple(sorted(new_hosts - old_hosts)),
        removed_hosts=tuple(sorted(old_hosts - new_hosts)),
        changes=tuple(sorted(changes, key=lambda c: (-len(c.hosts), c.fact, c.kind))),
        tolerance=tolerance,
        old_inventory=old.inventory,
        new_inventory=new.inventory,
        probes_only_old=tuple(sorted(old_probes - new_probes)),
        probes_only_new=tuple(sorted(new_probes - old_probes)),
        left_out=tuple(sorted(left_out)),
        left_out_why=why if left_out else "",
    )


def selected_by_both(
    old: Run, new: Run, limit: str | None = None
) -> tuple[set[str], set[str], set[str], str]:
    """Each run's hosts to compare, the hosts left out, and why: those `limit` does not select,
    and those one run has that the other, narrowed by its own --limit, did not select."""
    old_hosts, new_hosts = set(old.hosts), set(new.hosts)
    left_out: set[str] = set()
    why = []
    if limit:
        everyone = sorted(old_hosts | new_hosts)
        chosen = set(select_names(everyone, {}, limit))
        left_out |= (old_hosts | new_hosts) - chosen
        old_hosts, new_hosts = old_hosts & chosen, new_hosts & chosen
        why.append(f"--limit {limit}")
    if new.limit and old_hosts - new_hosts:  # not selected by the new run: not gone
        left_out |= old_hosts - new_hosts
        old_hosts &= new_hosts
        why.append(f"the new run's --limit {new.limit}")
    if old.limit and new_hosts - old_hosts:  # not selected by the old run: not new
        left_out |= new_hosts - old_hosts
        new_hosts &= old_hosts
        why.append(f"the old run's --limit {old.limit}")
    return old_hosts, new_hosts, left_out, "; ".join(why)


def probes_run(run: Run) -> frozenset[str]:
    """The probes a run shipped to its hosts (older documents without the list: those reported)."""
    if run.probes:
        return frozenset(run.probes)
    return frozenset(p for outcome in run.hosts.values() for p in outcome.probes)


Change_ = tuple[str, str, Value, Value]  # (fact, kind, old, new) as a host's change


def host_changes(
    old: HostOutcome,
    new: HostOutcome,
    cache: FactCache,
    tolerance: float,
    compared: Collection[str] | None = None,
    memo: dict[tuple[Any, ...], tuple[Change_, ...]] | None = None,
) -> Iterable[Change_]:
    """What changed on one host, over the `compared` probes (default: every probe either ran).
    `memo`: each probe's changes by the pair of payloads (their facts' objects, the cache's,
    one per class of payload that measures alike) and the probes both ran, so a pair many
    hosts reported is compared once."""
    if old.status != new.status:
        yield (HOST_STATUS, "status", old.status, new.status)
    before_all, after_all = old.probes, new.probes
    ran_both = frozenset(
        probe
        for probe, result in before_all.items()
        if result.status == "ok" and probe in after_all and after_all[probe].status == "ok"
    )
    probes = before_all.keys() | after_all.keys()
    if compared is not None:
        probes &= compared if isinstance(compared, (set, frozenset)) else set(compared)
    memo = {} if memo is None else memo
    for probe in sorted(probes):
        before = _part(cache, probe, before_all.get(probe))
        after = _part(cache, probe, after_all.get(probe))
        pair = (probe, id(before[1]), id(after[1]), ran_both)
        found = memo.get(pair)
        if found is None:
            found = memo[pair] = tuple(_probe_changes(before, after, ran_both, tolerance))
        yield from found


def _probe_changes(
    before: tuple[int | None, HostFacts],
    after: tuple[int | None, HostFacts],
    ran_both: Collection[str],
    tolerance: float,
) -> Iterable[Change_]:
    if before[0] is None or before[0] != after[0]:  # equal content: nothing changed there
        yield from _value_changes(before[1], after[1], ran_both)
        yield from _set_changes(before[1], after[1])
    yield from _measure_changes(before[1], after[1], tolerance)


_ABSENT = (None, HostFacts())  # a probe a host did not report: one object (its id keys the memo)


def _part(cache: FactCache, probe: str, result: ProbeResult | None) -> tuple[int | None, HostFacts]:
    return _ABSENT if result is None else cache.part(probe, result)


def _value_changes(
    before: HostFacts, after: HostFacts, ran_both: Collection[str]
) -> Iterable[tuple[str, str, Value, Value]]:
    for path in sorted(set(before.values) | set(after.values)):
        probe = probe_of(path)
        if path not in before.values and path not in after.values:
            continue
        one_sided = path not in before.values or path not in after.values
        if one_sided and probe not in ran_both and path != status_path(probe):
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
