"""Cross-host diff: which facts are not the same on every host that reported them. Pure.

A probe's data is flattened into facts: `torch.version`, `gpu.gpus.0.name`, `nccl.env.NCCL_P2P_DISABLE`.
Lists of scalars stay one fact (a tuple); lists of objects get an index per item plus a `.len` fact.
Each fact has a kind, chosen by the first matching pattern of FACT_KINDS:
  - "identity": unique per host by nature (hostname, UUIDs): never divergence;
  - "measure":  a timing or throughput: compared with tolerance by later layers, not here;
  - "fact":     everything else: any difference is divergence.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.models import NOT_REACHED, HostOutcome

FACT_KINDS: tuple[tuple[str, str], ...] = (
    ("system.hostname", "identity"),
    ("system.python.executable", "fact"),
    ("*.elapsed_s", "measure"),
    ("*.uuid", "identity"),
    ("*.pci_bus_id", "identity"),
    ("*.serial", "identity"),
    ("*.latency_us", "measure"),
    ("*.iterations", "measure"),
    ("*.algbw_gbps", "measure"),
    ("*.busbw_gbps", "measure"),
    ("*.temperature*", "measure"),
    ("*.power*", "measure"),
)

Value = Any  # hashable: str, int, float, bool, None, or a tuple of those


def fact_kind(path: str) -> str:
    for pattern, kind in FACT_KINDS:
        if fnmatch.fnmatchcase(path, pattern):
            return kind
    return "fact"


def flatten(value: Any, prefix: str) -> dict[str, Value]:
    """Nested JSON → {dotted path: hashable value}."""
    if isinstance(value, Mapping):
        facts: dict[str, Value] = {}
        for key, item in value.items():
            facts.update(flatten(item, f"{prefix}.{key}"))
        return facts
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, Mapping) for v in value):
            facts = {f"{prefix}.len": len(value)}
            for index, item in enumerate(value):
                facts.update(flatten(item, f"{prefix}.{index}"))
            return facts
        return {prefix: tuple(_hashable(v) for v in value)}
    return {prefix: value}


def _hashable(value: Any) -> Value:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    return value


def host_facts(outcome: HostOutcome) -> dict[str, Value]:
    """Every comparable fact a host reported: each probe's status and its flattened data."""
    facts: dict[str, Value] = {}
    for probe, result in outcome.probes.items():
        facts[f"{probe}.status"] = result.status
        facts.update(flatten(result.data, probe))
    return {path: v for path, v in facts.items() if fact_kind(path) == "fact"}


@dataclass(frozen=True)
class Divergence:
    fact: str
    majority: Value
    majority_hosts: tuple[str, ...]
    others: tuple[tuple[Value, tuple[str, ...]], ...]  # (value, hosts), most hosts first

    @property
    def differing_hosts(self) -> tuple[str, ...]:
        return tuple(h for _, hosts in self.others for h in hosts)


def compared_hosts(outcomes: Iterable[HostOutcome]) -> list[HostOutcome]:
    """Hosts that reported anything: an unreachable host is an outcome, not a divergent value."""
    return [o for o in outcomes if o.status not in NOT_REACHED and o.probes]


def diverging_facts(outcomes: Iterable[HostOutcome]) -> list[Divergence]:
    """Facts whose value differs between hosts that reported them, in fact-path order.

    A host whose probe ran fine but has no value at a path (NCCL_P2P_DISABLE unset, a 2-GPU host
    beside 8-GPU ones) counts as `None` there: unset is a value. A host whose probe did not run
    or found its subject absent is left out of that probe's facts (its `.status` shows why).
    """
    hosts = compared_hosts(outcomes)
    per_host = {o.name: host_facts(o) for o in hosts}
    ran_ok = {o.name: {p for p, r in o.probes.items() if r.status == "ok"} for o in hosts}
    paths = sorted({p for facts in per_host.values() for p in facts})
    found = []
    for path in paths:
        probe = path.split(".", 1)[0]
        values = {host: facts.get(path) for host, facts in per_host.items()
                  if path in facts or probe in ran_ok[host]}
        if len(set(values.values())) > 1:
            found.append(_divergence(path, values))
    return found


def _divergence(path: str, values: Mapping[str, Value]) -> Divergence:
    counts = Counter(values.values())
    # most hosts first; ties broken by the value's text so the output is stable
    ranked = sorted(counts, key=lambda v: (-counts[v], repr(v)))
    groups = [(v, tuple(sorted(h for h, hv in values.items() if hv == v))) for v in ranked]
    (majority, majority_hosts), *others = groups
    return Divergence(path, majority, majority_hosts, tuple(others))


@dataclass(frozen=True)
class DivergenceGroup:
    """The same fact across devices (`torch.p2p_access.*.*` of 8-GPU hosts beside 2-GPU ones),
    splitting the hosts the same way: shown as one row instead of 56."""

    parent: str
    items: tuple[Divergence, ...]

    @property
    def differing_hosts(self) -> tuple[str, ...]:
        return tuple(sorted({h for item in self.items for h in item.differing_hosts}))


COLLAPSE_AT = 4


def group_divergences(divergences: Iterable[Divergence]) -> list[Divergence | DivergenceGroup]:
    """Collapse ≥ COLLAPSE_AT facts that differ only in a device index and split hosts alike."""
    buckets: dict[tuple[str, Any], list[Divergence]] = {}
    for item in divergences:
        buckets.setdefault((_shape(item.fact), _host_split(item)), []).append(item)
    shown: list[Divergence | DivergenceGroup] = []
    for (parent, _), items in buckets.items():
        if len(items) >= COLLAPSE_AT:
            shown.append(DivergenceGroup(parent, tuple(items)))
        else:
            shown.extend(items)
    return sorted(shown, key=lambda d: d.fact if isinstance(d, Divergence) else d.parent)


DEVICE_INDEX = re.compile(r"(?:GPU|NIC|mlx5_)?\d+")


def _shape(path: str) -> str:
    """`torch.p2p_access.5.7` → `torch.p2p_access.*.*`; `gpu.gpus.3.name` → `gpu.gpus.*.name`."""
    return ".".join("*" if DEVICE_INDEX.fullmatch(part) else part for part in path.split("."))


def _host_split(item: Divergence) -> frozenset[tuple[str, ...]]:
    return frozenset([item.majority_hosts, *(hosts for _, hosts in item.others)])


def list_delta(majority: Value, other: Value, limit: int = 6) -> str | None:
    """For list facts (dir() names, arch lists): `+added −removed` relative to the majority."""
    if not isinstance(majority, tuple) or not isinstance(other, tuple):
        return None
    added = [str(v) for v in other if v not in set(majority)]
    removed = [str(v) for v in majority if v not in set(other)]
    parts = [f"+{v}" for v in added[:limit]] + [f"−{v}" for v in removed[:limit]]
    hidden = max(0, len(added) - limit) + max(0, len(removed) - limit)
    return (
        " ".join(parts) + (f" (+{hidden} more)" if hidden else "")
        if parts
        else "same items, other order"
    )
