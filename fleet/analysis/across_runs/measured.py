"""What a host measured, named once for baselines: allreduce latency and bus bandwidth per size and
mode, each variant of the allreduce matrix, fabric pair figures; and the software it measured with.
Pure.

One figure per size, the one that size is about: latency below 1 MiB (where a message costs its
fixed overhead), bus bandwidth from 1 MiB up (where it costs its bytes). A name reads like the
diff's measurements, `allreduce graph 8 B latency_us`, `allreduce eager 256 MiB busbw_gbps`, with
the variant for the matrix (`allreduce-matrix nccl:Ring/LL graph 8 B latency_us`) and the backend
for the fabric (`fabric nccl 256 MiB busbw_gbps`: the host's median over its pairs).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.analysis.facts import human_bytes
from fleet.models import HostOutcome, Run

FAMILIES = ("allreduce", "allreduce-matrix", "fabric")
METRICS = ("latency_us", "busbw_gbps")
BANDWIDTH_FROM = 1 << 20  # sizes from here on are judged by bus bandwidth, below by latency
UNITS = {"latency_us": "µs", "busbw_gbps": "GB/s"}
WORDS = {"latency_us": "latency", "busbw_gbps": "busbw"}
VERSIONS = ("torch", "cuda", "nccl", "driver")
VERSION_LABELS = {"torch": "torch", "cuda": "CUDA", "nccl": "NCCL", "driver": "driver"}
_MODE = re.compile(r"^[A-Za-z0-9_.-]+$")
_CUDA_BUILD = re.compile(r"\+cu(\d+)(\d)$")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_NAME = re.compile(
    r"^(?P<family>allreduce-matrix|allreduce|fabric) (?:(?P<variant>\S+:\S+) )?"
    r"(?P<mode>[A-Za-z0-9_.-]+) (?P<count>\d+) (?P<unit>B|KiB|MiB|GiB) "
    r"(?P<metric>latency_us|busbw_gbps)$"
)


@dataclass(frozen=True, order=True)
class Key:
    """One measurement: a family, the matrix variant (else ""), the mode (eager, graph; the
    backend for the fabric), the message size and the metric."""

    family: str
    variant: str
    mode: str
    size: int
    metric: str

    @property
    def name(self) -> str:
        variant = f"{self.variant} " if self.variant else ""
        return f"{self.family} {variant}{self.mode} {human_bytes(self.size)} {self.metric}"

    @property
    def short(self) -> str:
        """What a verdict names, its family said by the rule: `graph 8 B latency`."""
        variant = f"{self.variant} " if self.variant else ""
        mode = f"{self.mode} " if self.family != "fabric" else f"pairs ({self.mode}) "
        return f"{variant}{mode}{human_bytes(self.size)} {WORDS[self.metric]}"

    @property
    def unit(self) -> str:
        return UNITS[self.metric]

    @classmethod
    def parse(cls, name: str) -> Key | None:
        """A name as `name` writes it; None when it is not one."""
        match = _NAME.match(name)
        if match is None:
            return None
        family, variant = match["family"], match["variant"] or ""
        if (family == "allreduce-matrix") != bool(variant):
            return None  # the matrix, and only the matrix, names a variant
        return cls(family, variant, match["mode"], int(match["count"]) * _UNITS[match["unit"]],
                   match["metric"])  # fmt: skip


def metric_for(size: int) -> str:
    return "busbw_gbps" if size >= BANDWIDTH_FROM else "latency_us"


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _rows(rows: Any, family: str, variant: str = "") -> Iterator[tuple[Key, float]]:
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, Mapping) or row.get("correct") is False:
            continue  # a wrong sum is no measurement (the probe's own status says so)
        size = row.get("bytes")
        if type(size) is not int or size <= 0:
            continue
        metric, mode = metric_for(size), str(row.get("mode"))
        value = _number(row.get(metric))
        if value is not None and _MODE.match(mode):  # a name that reads back
            yield Key(family, variant, mode, size, metric), value


def allreduce_measured(data: Mapping[str, Any]) -> dict[Key, float]:
    """The allreduce probe's sweep, and each variant of its matrix when it ran one."""
    found = dict(_rows(data.get("results"), "allreduce"))
    matrix = data.get("matrix")
    variants = matrix.get("variants") if isinstance(matrix, Mapping) else None
    for variant, entry in sorted(variants.items()) if isinstance(variants, Mapping) else []:
        if isinstance(entry, Mapping) and ":" in str(variant) and " " not in str(variant):
            found.update(_rows(entry.get("rows"), "allreduce-matrix", str(variant)))
    return found


def fabric_measured(section: Mapping[str, Any], host: str) -> dict[Key, float]:
    """A host's fabric figures: per size, the median over its pairs that ran well."""
    backend = str(section.get("backend"))
    if not _MODE.match(backend):
        return {}
    per_size: dict[int, list[float]] = {}
    for pair in section.get("pairs") or []:
        if not isinstance(pair, Mapping) or host not in (pair.get("hosts") or ()):
            continue
        if pair.get("status") != "ok" or pair.get("correct") is False:
            continue
        for row in pair.get("sizes") or []:
            size = row.get("bytes") if isinstance(row, Mapping) else None
            if type(size) is not int or size <= 0:
                continue
            metric = metric_for(size)
            value = _number(row.get("time_us" if metric == "latency_us" else metric))
            if value is not None:
                per_size.setdefault(size, []).append(value)
    return {
        Key("fabric", "", backend, size, metric_for(size)): float(statistics.median(values))
        for size, values in per_size.items()
    }


def host_measured(run: Run, outcome: HostOutcome) -> dict[Key, float]:
    """Everything `outcome` measured that a baseline keeps, from probes that succeeded (what a
    failed or timed-out probe left is no measurement of a sound host)."""
    found: dict[Key, float] = {}
    allreduce = outcome.probes.get("allreduce")
    if allreduce is not None and allreduce.status == "ok" and isinstance(allreduce.data, Mapping):
        found.update(allreduce_measured(allreduce.data))
    fabric = outcome.probes.get("fabric")
    if isinstance(run.fabric, Mapping) and fabric is not None and fabric.status == "ok":
        found.update(fabric_measured(run.fabric, outcome.name))
    return found


def family_source(run: Run, outcome: HostOutcome, family: str) -> tuple[str, str | None]:
    """Whether the run could have measured `family` on this host: ("ran", None); ("not this
    kind of run", why): a fabric figure in a probe run or the reverse (n/a, as for rules);
    ("not run", why): the probe was not asked for (the figures are missing: unknown);
    ("failed", why): it ran and did not succeed (skipped)."""
    if family == "fabric":
        if run.fabric is None:
            return "not this kind of run", "no fabric results: run `fleet fabric`"
        probe = "fabric"
    else:
        if run.fabric is not None and "allreduce" not in outcome.probes:
            return "not this kind of run", "a `fleet fabric` run: no allreduce probe"
        probe = "allreduce"
    result = outcome.probes.get(probe)
    if result is None:
        return "not run", f"probe {probe} was not run"
    if result.status != "ok":
        why = f": {result.error.splitlines()[0]}" if result.error else ""
        return "failed", f"probe {probe} {result.status}{why}"
    if family == "allreduce-matrix" and not isinstance(result.data.get("matrix"), Mapping):
        return "not run", "no allreduce matrix in this run (fleet probe --allreduce-matrix)"
    return "ran", None


# ------------------------------------------------------------------------------------ versions


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int, float)) and str(value).strip() else None


def _data(outcome: HostOutcome, probe: str) -> Mapping[str, Any]:
    result = outcome.probes.get(probe)
    return result.data if result is not None and isinstance(result.data, Mapping) else {}


def host_versions(outcome: HostOutcome) -> dict[str, str | None]:
    """torch, CUDA (the one torch was built for), NCCL (the one the allreduce ran on, else torch's) and the
    driver, from whichever probes ran; None where none said."""
    allreduce, torch = _data(outcome, "allreduce"), _data(outcome, "torch")
    nccl, gpu = _data(outcome, "nccl"), _data(outcome, "gpu")
    torch_version = _text(allreduce.get("torch_version")) or _text(torch.get("version"))
    return {
        "torch": torch_version,
        "cuda": _text(torch.get("cuda")) or _cuda_of_build(torch_version),
        "nccl": _text(allreduce.get("nccl_version"))
        or _text(torch.get("nccl_version"))
        or _text(nccl.get("torch_nccl_version")),
        "driver": _text(gpu.get("driver_version")),
    }


def _cuda_of_build(torch_version: str | None) -> str | None:
    """The CUDA a torch wheel was built for, as torch.version.cuda says it: +cu130 → 13.0."""
    match = _CUDA_BUILD.search(torch_version or "")
    return f"{match[1]}.{match[2]}" if match else None


def gpu_identity(outcome: HostOutcome) -> tuple[str, int] | None:
    """GPU model and count from the allreduce probe's own data: what places a host whose run had
    no gpu probe (`-p allreduce`) in its cohort."""
    data = _data(outcome, "allreduce")
    name, count = data.get("device_name"), data.get("device_count")
    if isinstance(name, str) and name and type(count) is int and count > 0:
        return name, count
    return None
