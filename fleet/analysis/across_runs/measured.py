"""What a host measured, named once for baselines, and the families of measurements a baseline
keeps; the units declare the families (BASELINE_FAMILIES in fleet/units/PROBE/facts.py: the
allreduce's sweep and matrix, the fabric's pairs, a probe of your own's) and say how a host's
figures are read. Pure.

A measurement is a Key: its family, a variant (only a family that has variants names one), a
mode, a message size (0: none) and a metric. For sizes, one figure per size, the one that size
is about: latency below 1 MiB (where a message costs its fixed overhead), bus bandwidth from
1 MiB up (where it costs its bytes). A name reads like the diff's measurements, `allreduce graph
8 B latency_us`, `allreduce eager 256 MiB busbw_gbps`, with the variant for the matrix
(`allreduce-matrix nccl:Ring/LL graph 8 B latency_us`) and the backend for the fabric
(`fabric nccl 256 MiB busbw_gbps`: the host's median over its pairs).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fleet import registry
from fleet.analysis.facts import human_bytes
from fleet.models import HostOutcome, Run

METRICS = ("latency_us", "busbw_gbps")
BANDWIDTH_FROM = 1 << 20  # sizes from here on are judged by bus bandwidth, below by latency
UNITS = {"latency_us": "µs", "busbw_gbps": "GB/s"}
WORDS = {"latency_us": "latency", "busbw_gbps": "busbw"}
_MODE = re.compile(r"^[A-Za-z0-9_.-]+$")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_NAME_TAIL = (
    r"(?P<mode>[A-Za-z0-9_.-]+) (?:(?P<count>\d+) (?P<unit>B|KiB|MiB|GiB) )?"
    r"(?P<metric>[a-z][a-z0-9_]*)$"
)

# How a host stands with a family: ("ran", None), or a state and why: "not this kind of run"
# (a fabric figure in a probe run: n/a), "not run" (unknown), "failed" (skipped).
Source = tuple[str, "str | None"]


@dataclass(frozen=True)
class BaselineFamily:
    """A family of measurements a baseline keeps, as a unit declares it."""

    name: str  # the measurements' first word: `allreduce`, `fabric`
    text: str  # what it measures, as the baseline's rule describes it
    measure: Callable[[Run, HostOutcome], dict[Key, float]]  # a host's figures ({}: none)
    source: Callable[[Run, HostOutcome], Source]  # whether the run could have measured it
    variants: bool = False  # its names carry a variant (the matrix's `nccl:Ring/LL`)
    mode_text: str = "{}"  # how a verdict says the mode: the fabric's `pairs ({})` (the backend)
    metrics: tuple[str, ...] = METRICS  # the metrics its names end with
    sized: bool = True  # its names carry a message size (`8 B`); False: none


def baseline_families() -> dict[str, BaselineFamily]:
    """Every unit's baseline families, in the units' order."""
    return _families(registry.version())


@functools.lru_cache(maxsize=4)
def _families(version: int) -> dict[str, BaselineFamily]:
    return {
        family.name: family
        for _, facts in registry.parts("facts")
        for family in getattr(facts, "BASELINE_FAMILIES", ())
    }


@functools.lru_cache(maxsize=4)
def _name_pattern(version: int) -> re.Pattern[str]:
    names = sorted(_families(version), key=len, reverse=True)  # allreduce-matrix before allreduce
    alternatives = "|".join(re.escape(name) for name in names) or "(?!)"
    return re.compile(rf"^(?P<family>{alternatives}) (?:(?P<variant>\S+:\S+) )?" + _NAME_TAIL)


@dataclass(frozen=True, order=True)
class Key:
    """One measurement: a family, the matrix variant (else ""), the mode (eager, graph; the
    backend for the fabric), the message size (0: none) and the metric."""

    family: str
    variant: str
    mode: str
    size: int
    metric: str

    @property
    def name(self) -> str:
        variant = f"{self.variant} " if self.variant else ""
        return f"{self.family} {variant}{self.mode} {self._size}{self.metric}"

    @property
    def _size(self) -> str:
        return f"{human_bytes(self.size)} " if self.size else ""

    @property
    def short(self) -> str:
        """What a verdict names, its family said by the rule: `graph 8 B latency`, the fabric's
        `pairs (nccl) 256 MiB busbw` (its BaselineFamily.mode_text)."""
        variant = f"{self.variant} " if self.variant else ""
        family = baseline_families().get(self.family)
        mode = family.mode_text.format(self.mode) if family else self.mode
        return f"{variant}{mode} {self._size}{WORDS.get(self.metric, self.metric)}"

    @property
    def unit(self) -> str:
        return UNITS.get(self.metric, "")

    @classmethod
    def parse(cls, name: str) -> Key | None:
        """A name as `name` writes it; None when it is not one."""
        match = _name_pattern(registry.version()).match(name)
        if match is None:
            return None
        family, variant = baseline_families()[match["family"]], match["variant"] or ""
        if family.variants != bool(variant) or family.sized != bool(match["count"]):
            return None  # only a family with variants names one; only a sized one, a size
        if match["metric"] not in family.metrics:
            return None
        size = int(match["count"]) * _UNITS[match["unit"]] if match["count"] else 0
        return cls(family.name, variant, match["mode"], size, match["metric"])


def metric_for(size: int) -> str:
    return "busbw_gbps" if size >= BANDWIDTH_FROM else "latency_us"


def number_or_none(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def good_mode(mode: str) -> bool:
    """Whether `mode` can stand in a measurement's name (one that reads back)."""
    return bool(_MODE.match(mode))


def sized_rows(rows: Any, family: str, variant: str = "") -> Iterator[tuple[Key, float]]:
    """A probe's rows of sizes (bytes, mode, latency_us, busbw_gbps, correct) as measurements."""
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, Mapping) or row.get("correct") is False:
            continue  # a wrong sum is no measurement (the probe's own status says so)
        size = row.get("bytes")
        if type(size) is not int or size <= 0:
            continue
        metric, mode = metric_for(size), str(row.get("mode"))
        value = number_or_none(row.get(metric))
        if value is not None and good_mode(mode):  # a name that reads back
            yield Key(family, variant, mode, size, metric), value


def host_measured(run: Run, outcome: HostOutcome) -> dict[Key, float]:
    """Everything `outcome` measured that a baseline keeps, from probes that succeeded (what a
    failed or timed-out probe left is no measurement of a sound host)."""
    found: dict[Key, float] = {}
    for family in baseline_families().values():
        if family.source(run, outcome)[0] == "ran":
            found.update(family.measure(run, outcome))
    return found


def family_source(run: Run, outcome: HostOutcome, family: str) -> Source:
    """Whether the run could have measured `family` on this host: ("ran", None); ("not this
    kind of run", why): a fabric figure in a probe run or the reverse (n/a, as for rules);
    ("not run", why): the probe was not asked for (the figures are missing: unknown);
    ("failed", why): it ran and did not succeed (skipped)."""
    return baseline_families()[family].source(run, outcome)


def probe_source(outcome: HostOutcome, probe: str) -> Source:
    """How a family measured by `probe` stands on this host: ran, not run, or failed."""
    result = outcome.probes.get(probe)
    if result is None:
        return "not run", f"probe {probe} was not run"
    if result.status != "ok":
        why = f": {result.error.splitlines()[0]}" if result.error else ""
        return "failed", f"probe {probe} {result.status}{why}"
    return "ran", None
