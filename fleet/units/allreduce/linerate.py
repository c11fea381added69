"""The hardware's expected band without a baseline: allreduce bus bandwidth as a share of the line
rate of the link between a host's GPUs. Pure.

Line rate, per direction, per GPU:
- NVLink: links between two GPUs (`NV18` in `nvidia-smi topo -m`; the fewest over GPU pairs) ×
  the per-link rate of the GPU's NVLink generation (NVLINK, from NVIDIA's datasheets: H100/H200
  18 × 25 GB/s = 450 GB/s, "900 GB/s" counting both directions);
- PCIe: the link's lanes × the per-lane rate of its generation (PCIE_LANE: 128b/130b encoding from
  gen 3, FLIT from gen 6), from the gpu probe's maximum link generation and width (the slowest GPU).
A host whose gpu probe did not run or did not say gets no line rate, and is said so.

nccl-tests' bus bandwidth is comparable with that rate: an allreduce that keeps the link busy in
both directions reaches it. What NCCL chose is said beside it: the NCCL_ALGO / NCCL_PROTO the host
sets, else the allreduce matrix's variant whose time at that size is nearest NCCL's own default
(`fleet probe --allreduce-matrix`), else that it was not recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.analysis.facts import human_bytes, median
from fleet.models import HostOutcome
from fleet.units.allreduce.facts import allreduce_ends

# compute capability → (NVLink generation, GB/s per link per direction)
NVLINK: Mapping[str, tuple[int, float]] = {
    "6.0": (1, 20.0),  # P100
    "7.0": (2, 25.0),  # V100
    "8.0": (3, 25.0),  # A100
    "8.6": (3, 14.0625),  # A40, RTX A6000 (NVLink bridge: 4 links, 56.25 GB/s)
    "9.0": (4, 25.0),  # H100, H200, GH200
    "10.0": (5, 50.0),  # B200, GB200
    "10.3": (5, 50.0),  # B300, GB300
}
# PCIe generation → GB/s per lane per direction
PCIE_LANE: Mapping[int, float] = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
NV_LINKS = re.compile(r"^NV(\d+)$")
NEAREST_WITHIN = 0.05  # a matrix variant this close to NCCL's default is what NCCL chose


@dataclass(frozen=True)
class LineRate:
    gbps: float  # per direction, per GPU
    basis: str  # "NVLink 4 × 18 links × 25 GB/s", "PCIe 5 x16 × 3.938 GB/s"


@dataclass(frozen=True)
class HostLineRate:
    host: str
    rate: LineRate | None
    why_not: str  # when rate is None
    busbw: Mapping[str, tuple[int, float]]  # mode → (bytes, bus bandwidth at the largest size)
    nccl_choice: str

    def percent(self, mode: str) -> float | None:
        if self.rate is None or mode not in self.busbw:
            return None
        return 100.0 * self.busbw[mode][1] / self.rate.gbps


def line_rate(gpu: Mapping[str, Any]) -> tuple[LineRate | None, str]:
    """The line rate of the gpu probe's data, or None and why."""
    gpus = [g for g in gpu.get("gpus") or [] if isinstance(g, Mapping)]
    if not gpus:
        return None, "no GPU in the gpu probe's data"
    interconnect = gpu.get("interconnect")
    if interconnect == "nvlink":
        return _nvlink(gpu, gpus)
    if interconnect == "pcie":
        return _pcie(gpus)
    return None, f"interconnect {interconnect or 'not known'}: no line rate"


def _nvlink(gpu: Mapping[str, Any], gpus: list[Mapping[str, Any]]) -> tuple[LineRate | None, str]:
    capability = str(gpus[0].get("compute_capability") or "?")
    if capability not in NVLINK:
        return None, f"no NVLink rate known for compute capability {capability}"
    generation, per_link = NVLINK[capability]
    matrix = (gpu.get("topology") or {}).get("matrix") or []
    links = [
        int(match[1])
        for row in matrix
        if isinstance(row, list)
        for cell in row
        if isinstance(cell, str) and (match := NV_LINKS.match(cell))
    ]
    if not links:
        return None, "no NV# link count in the topology matrix"
    count = min(links)
    return LineRate(
        count * per_link, f"NVLink {generation} × {count} links × {per_link:g} GB/s"
    ), ""


def _pcie(gpus: list[Mapping[str, Any]]) -> tuple[LineRate | None, str]:
    rates = []
    for gpu in gpus:
        generation = gpu.get("pcie_gen_max") or gpu.get("pcie_gen")
        width = gpu.get("pcie_width_max") or gpu.get("pcie_width")
        if type(generation) is not int or type(width) is not int or generation not in PCIE_LANE:
            return None, "the gpu probe did not read the PCIe generation and width"
        rates.append((PCIE_LANE[generation] * width, generation, width))
    gbps, generation, width = min(rates)
    return LineRate(gbps, f"PCIe {generation} x{width} × {PCIE_LANE[generation]:g} GB/s"), ""


def host_line_rate(outcome: HostOutcome) -> HostLineRate | None:
    """The host's largest-size bus bandwidth per mode against its line rate; None when it has no
    allreduce figures."""
    allreduce = outcome.probes.get("allreduce")
    if allreduce is None or allreduce.status != "ok":
        return None
    ends = allreduce_ends(allreduce.data)
    busbw = {
        mode: (int(large["bytes"]), float(large["busbw_gbps"]))
        for mode, (_, large) in ends.items()
        if isinstance(large.get("busbw_gbps"), (int, float))
    }
    if not busbw:
        return None
    gpu = outcome.probes.get("gpu")
    if gpu is None or gpu.status != "ok":
        rate, why = None, "no gpu probe data: no line rate"
    else:
        rate, why = line_rate(gpu.data)
    return HostLineRate(outcome.name, rate, why, busbw, nccl_choice(outcome, busbw))


def nccl_choice(outcome: HostOutcome, busbw: Mapping[str, tuple[int, float]]) -> str:
    """What NCCL ran at the largest size, as well as the run can tell."""
    nccl = outcome.probes.get("nccl")
    env = nccl.data.get("env") if nccl is not None else None
    if isinstance(env, Mapping):
        set_here = [f"{k}={env[k]}" for k in ("NCCL_ALGO", "NCCL_PROTO") if env.get(k)]
        if set_here:
            return "set on the host: " + " ".join(set_here)
    allreduce = outcome.probes.get("allreduce")
    matrix = allreduce.data.get("matrix") if allreduce is not None else None
    variants = matrix.get("variants") if isinstance(matrix, Mapping) else None
    if not isinstance(variants, Mapping) or "nccl:default" not in variants:
        return "NCCL's algorithm not recorded (fleet probe --allreduce-matrix times each)"
    return _nearest(variants)


def _nearest(variants: Mapping[str, Any]) -> str:
    timed: dict[str, dict[tuple[str, int], float]] = {}
    for name, entry in variants.items():
        if not str(name).startswith("nccl:") or not isinstance(entry, Mapping):
            continue
        for row in entry.get("rows") or []:
            if isinstance(row, Mapping) and isinstance(row.get("latency_us"), (int, float)):
                timed.setdefault(str(name), {})[(str(row.get("mode")), int(row["bytes"]))] = row[
                    "latency_us"
                ]
    default = timed.pop("nccl:default", {})
    if not default:
        return "NCCL's algorithm not recorded (nccl:default did not run in the matrix)"
    mode, size = max(default, key=lambda m: (m[1], m[0] == "eager"))
    target = default[(mode, size)]
    near = sorted(
        (abs(times[(mode, size)] / target - 1), name.removeprefix("nccl:"))
        for name, times in timed.items()
        if (mode, size) in times
    )
    chosen = [name for gap, name in near if gap <= NEAREST_WITHIN]
    where = f"{mode} {human_bytes(size)}"
    if not chosen:
        return f"NCCL's default matched no single algorithm of the matrix at {where}"
    return f"NCCL's default timed like {' or '.join(chosen[:3])} at {where} (matrix)"


@dataclass(frozen=True)
class CohortLineRate:
    cohort: str
    hosts: tuple[HostLineRate, ...]

    @property
    def rate(self) -> LineRate | None:
        rates = [h.rate for h in self.hosts if h.rate is not None]
        return min(rates, key=lambda r: r.gbps) if rates else None

    def modes(self) -> list[str]:
        return sorted({m for h in self.hosts for m in h.busbw}, key=lambda m: (m != "eager", m))

    def median_percent(self, mode: str) -> float | None:
        found = [p for h in self.hosts if (p := h.percent(mode)) is not None]
        return median(found) if found else None

    def lowest(self, mode: str) -> HostLineRate | None:
        found = [h for h in self.hosts if h.percent(mode) is not None]
        return min(found, key=lambda h: h.percent(mode) or 0.0) if found else None

    def to_dict(self) -> dict[str, Any]:
        rate = self.rate
        return {
            "cohort": self.cohort,
            "line_rate_gbps": rate.gbps if rate else None,
            "basis": rate.basis if rate else None,
            "hosts": {
                h.host: {
                    "line_rate_gbps": h.rate.gbps if h.rate else None,
                    "why_not": h.why_not or None,
                    "nccl": h.nccl_choice,
                    "modes": {
                        mode: {
                            "bytes": size,
                            "busbw_gbps": value,
                            "percent": None if (p := h.percent(mode)) is None else round(p, 1),
                        }
                        for mode, (size, value) in h.busbw.items()
                    },
                }
                for h in self.hosts
            },
        }


def cohort_line_rates(
    cohorts: Iterable[tuple[str, Iterable[HostOutcome]]],
) -> list[CohortLineRate]:
    """Per cohort (name and its hosts), every host with allreduce figures against its line rate."""
    found = []
    for name, outcomes in cohorts:
        hosts = tuple(r for r in (host_line_rate(o) for o in outcomes) if r is not None)
        if hosts:
            found.append(CohortLineRate(name, hosts))
    return found
