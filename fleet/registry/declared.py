"""What the units declare before any host answers (each unit's probe.py), gathered for the
generic layers: the probes' options, which probes are opt-in, what a finding is about. Below
every stage, as the table it reads (fleet/registry/__init__.py)."""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from fleet import registry
from fleet.registry.options import ProbeOption

_cache: dict[tuple[str, int], object] = {}


def _declared() -> list[tuple[str, ModuleType]]:
    return registry.parts("probe")


def declared_options() -> list[tuple[str, ProbeOption]]:
    """Every unit's options, (probe, option), in the units' order."""
    return [
        (probe, option) for probe, part in _declared() for option in getattr(part, "OPTIONS", ())
    ]


def command_line_options() -> list[ProbeOption]:
    """The options as the command line offers them: one per key, the first unit's declaration."""
    seen: dict[str, ProbeOption] = {}
    for _, option in declared_options():
        seen.setdefault(option.key, option)
    return list(seen.values())


def option_defaults() -> dict[str, object]:
    return {option.key: option.default for option in command_line_options()}


def option_probes(key: str) -> tuple[str, ...]:
    """The probes whose unit declares the option `key`."""
    return tuple(probe for probe, option in declared_options() if option.key == key)


def opt_in() -> frozenset[str]:
    """The probes left out of the default set (run only when asked for)."""
    return frozenset(probe for probe, part in _declared() if getattr(part, "OPT_IN", False))


def _topics() -> list[tuple[int, str, str]]:
    key = ("topics", registry.version())
    if key not in _cache:
        ranked = [
            (getattr(part, "TOPIC_RANK", 1000), probe, str(part.TOPIC))
            for probe, part in _declared()
            if getattr(part, "TOPIC", None)
        ]
        _cache[key] = sorted(ranked)
    return _cache[key]  # type: ignore[return-value]


def topic_of(probes: Iterable[str]) -> str:
    """What a finding reading `probes` is about: the topic of the lowest-ranked one ("" none)."""
    named = set(probes)
    return next((topic for _, probe, topic in _topics() if probe in named), "")


def divergence_topic(kind: str) -> str:
    """The topic of a kind of cross-host divergence (`arch`, `nccl`, …), "" when no unit says."""
    for _, part in _declared():
        if kind in getattr(part, "DIVERGENCE", ()):
            return str(part.TOPIC)
    return ""


def command_probe(command: str) -> str:
    """The probe a command runs alone (its unit's COMMAND: `fleet jobs` runs live)."""
    found = [probe for probe, part in _declared() if getattr(part, "COMMAND", None) == command]
    if len(found) != 1:
        raise LookupError(f"{len(found)} units name {command!r} their COMMAND: expected one")
    return found[0]


def drain_witness() -> str:
    """The probe whose success lets `fleet drain` resume a node (its unit's DRAIN_WITNESS)."""
    found = [probe for probe, part in _declared() if getattr(part, "DRAIN_WITNESS", False)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} units are the drain witness: expected one")
    return found[0]


def gpu_sources() -> tuple[str, ...]:
    """The probes that say what a host's GPUs are, in the order asked (GPU_SOURCE_RANK): a run
    with only the second still groups H200 hosts apart from RTX 5090 hosts."""
    ranked = [
        (part.GPU_SOURCE_RANK, probe)
        for probe, part in _declared()
        if getattr(part, "GPU_SOURCE_RANK", None) is not None
    ]
    return tuple(probe for _, probe in sorted(ranked))
