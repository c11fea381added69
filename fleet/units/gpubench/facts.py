"""The gpubench probe's figures scored: which GPU and which link are slow. Pure.

Each GPU's figures (BF16/FP16/FP8 matmul TFLOPS, memory copy, pinned host copies, peer copies with
every pair active) are held against the best GPU of its host and against the median of its
cohort (every GPU of the same model in the run); each ordered pair's peer copies (one way, both
ways at once, every pair at once) against the host's median pair. A GPU is slow when a figure is
more than `tolerance` (default 10%) below the best on its host; a pair when more than
`pair_tolerance` (20%) below the median pair. The PCIe link and clock-event reasons read under
load, and `% of datasheet` (fleet/units/gpubench/datasheets.py), come along. Every verdict names
the GPU by its index, UUID and PCI bus id.

What the probe writes (probes/gpubench.py), in short:
    {"device_count", "gpus": [{"index", "uuid", "pci_bus_id", "name", "tflops": {dtype: x},
     "gbps": {"memcpy", "h2d", "d2h", "peer_out_all_active", "peer_in_all_active"},
     "load": {"pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max", "pcie_below_max",
              "clock_events", "hw_throttle", "hw_throttle_samples", "samples"}}],
     "pairs": [{"src", "dst", "gbps": {"one_way", "both_ways", "all_active"}}],
     "pairs_note", "stopped_early", "stopped"}
A list in the summary is null where it cannot be judged (a figure not measured on some GPU, a
reading nvidia-smi did not give): rules read null as unknown, never as a pass.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.units.gpubench.datasheets import Datasheet, datasheet_for

# A GPU this far below the best on its host, or its cohort's median. Not fleet's DEFAULT_TOLERANCE
# (0.25, fleet.models): a GPU is judged against GPUs of its own model, where 10% is already off,
# and `_gpubench.tolerance` and the terminal's "nothing off" line say 10% today.
DEFAULT_GPU_TOLERANCE = 0.10
DEFAULT_PAIR_TOLERANCE = 0.20  # a pair this far below its host's median pair
BETTER_HIGHER = ("_gbps", "_tflops")  # measurement names ending so: bandwidths, throughputs


@dataclass(frozen=True)
class Figure:
    key: str  # the summary's name: "bf16_tflops"
    group: str  # where the probe puts it: "tflops" or "gbps"
    field: str  # its key there: "bfloat16", "memcpy"
    label: str  # what people read: "BF16 matmul"
    unit: str
    sheet: str | None  # the Datasheet figure it is a share of: "bf16", "memory", "pcie", "peer"
    short: str = ""  # in a list of the other figures off: "FP16"
    judged: bool = True  # False: shown, but a slow link's doing, not a slow GPU's (pairs judge it)


GPU_FIGURES = (
    Figure("bf16_tflops", "tflops", "bfloat16", "BF16 matmul", "TFLOPS", "bf16", "BF16"),
    Figure("fp16_tflops", "tflops", "float16", "FP16 matmul", "TFLOPS", "bf16", "FP16"),
    Figure("fp8_tflops", "tflops", "float8_e4m3fn", "FP8 matmul", "TFLOPS", None, "FP8"),
    Figure(
        "memcpy_gbps", "gbps", "memcpy", "memory copy (read + write)", "GB/s", "memory", "memory"
    ),
    Figure("h2d_gbps", "gbps", "h2d", "host→device copy", "GB/s", "pcie", "host→device"),
    Figure("d2h_gbps", "gbps", "d2h", "device→host copy", "GB/s", "pcie", "device→host"),
    Figure(
        "peer_out_gbps",
        "gbps",
        "peer_out_all_active",
        "peer copies out, all pairs on",
        "GB/s",
        None,
        "peer out",
        judged=False,
    ),
    Figure(
        "peer_in_gbps",
        "gbps",
        "peer_in_all_active",
        "peer copies in, all pairs on",
        "GB/s",
        None,
        "peer in",
        judged=False,
    ),
)
PAIR_FIGURES = (
    Figure("one_way_gbps", "gbps", "one_way", "peer copy one way", "GB/s", "peer", "one way"),
    Figure(
        "both_ways_gbps",
        "gbps",
        "both_ways",
        "peer copy, both ways at once",
        "GB/s",
        "peer",
        "both ways",
    ),
    Figure(
        "all_active_gbps", "gbps", "all_active", "peer copy, all pairs on", "GB/s", None, "all on"
    ),
)


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def figure_of(entry: Mapping[str, Any], figure: Figure) -> float | None:
    group = entry.get(figure.group)
    return _number(group.get(figure.field)) if isinstance(group, Mapping) else None


def gpus_of(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [g for g in data.get("gpus") or [] if isinstance(g, Mapping)]


def pairs_of(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [p for p in data.get("pairs") or [] if isinstance(p, Mapping)]


def gpu_label(gpu: Mapping[str, Any]) -> str:
    """'GPU1 (GPU-8c2f…-uuid, 00000000:19:00.0)': index, UUID and bus id, as verdicts name it."""
    uuid = gpu.get("uuid") or "UUID not reported"
    bus = gpu.get("pci_bus_id") or "bus id not reported"
    return f"GPU{gpu.get('index', '?')} ({uuid}, {bus})"


def pair_label(pair: Mapping[str, Any]) -> str:
    return f"GPU{pair.get('src', '?')}→GPU{pair.get('dst', '?')}"


def _short(value: float) -> str:
    return f"{value:.4g}"


def _below(ratio: float) -> str:
    return f"{(1 - ratio) * 100:.1f}% below"


# ------------------------------------------------------------------------------ per GPU, per host


@dataclass(frozen=True)
class GpuScore:
    """One figure of one GPU against the best on its host (and its cohort's median)."""

    gpu: str
    figure: Figure
    value: float
    host_best: float
    best_gpu: str
    cohort_median: float | None = None

    @property
    def vs_host_best(self) -> float:
        return self.value / self.host_best if self.host_best > 0 else 1.0

    @property
    def vs_cohort(self) -> float | None:
        if self.cohort_median is None or self.cohort_median <= 0:
            return None
        return self.value / self.cohort_median


def score_gpus(
    data: Mapping[str, Any], cohort: Mapping[str, Mapping[str, float]] | None = None
) -> list[GpuScore]:
    """Every measured figure of every GPU, with the best of that figure on the host and, given
    `cohort` (model → figure key → median, from cohort_medians), its cohort's median."""
    gpus = gpus_of(data)
    scores = []
    for figure in GPU_FIGURES:
        values = [(gpu, figure_of(gpu, figure)) for gpu in gpus]
        measured = [(gpu, v) for gpu, v in values if v is not None]
        if not measured:
            continue
        best_gpu, best = max(measured, key=lambda item: item[1])
        for gpu, value in measured:
            median = ((cohort or {}).get(str(gpu.get("name"))) or {}).get(figure.key)
            scores.append(
                GpuScore(gpu_label(gpu), figure, value, best, gpu_label(best_gpu), median)
            )
    return scores


def unmeasured(data: Mapping[str, Any]) -> list[str]:
    """Figures some GPU of the host has and another lacks (its worker failed, or the budget ran
    out first): 'GPU1 (…): memory copy (read + write) not measured'."""
    gpus = gpus_of(data)
    missing = []
    for gpu in gpus:
        lacking = [
            f.label
            for f in GPU_FIGURES
            if figure_of(gpu, f) is None and any(figure_of(g, f) is not None for g in gpus)
        ]
        if lacking:
            why = f" ({gpu['error']})" if gpu.get("error") else ""
            missing.append(f"{gpu_label(gpu)}: {', '.join(lacking)} not measured{why}")
    return missing


Off = tuple[float, str, str]  # (ratio, the figure in full, its short name)


def findings(found: Mapping[str, Sequence[Off]]) -> list[str]:
    """One line per GPU or pair: its worst figure in full, then the others off by their short
    names: 'GPU1 (…): BF16 matmul 569 TFLOPS, 15.0% below …; also FP16 -15.0%, memory -14.9%'."""
    lines = []
    for who, offs in found.items():
        # worst first; within 0.1% the order of the figures (BF16 before the copies)
        ranked = sorted(range(len(offs)), key=lambda i: (round(offs[i][0], 3), i))
        worst, *others = (offs[i] for i in ranked)
        also = ", ".join(f"{short} -{(1 - ratio) * 100:.1f}%" for ratio, _, short in others)
        lines.append(f"{who}: {worst[1]}" + (f"; also {also}" if also else ""))
    return lines


def slow_gpus(scores: Sequence[GpuScore], tolerance: float) -> list[str]:
    """One line per GPU with a judged figure more than `tolerance` below the best on its host."""
    found: dict[str, list[Off]] = {}
    for s in scores:
        if s.figure.judged and s.vs_host_best < 1 - tolerance:
            best = s.best_gpu.split(" ")[0]
            text = (
                f"{s.figure.label} {_short(s.value)} {s.figure.unit}, {_below(s.vs_host_best)} "
                f"the best on its host ({best}: {_short(s.host_best)})"
            )
            found.setdefault(s.gpu, []).append((s.vs_host_best, text, s.figure.short))
    return findings(found)


def slow_vs_cohort(scores: Sequence[GpuScore], tolerance: float) -> list[str]:
    """One line per GPU with a judged figure more than `tolerance` below its cohort's median."""
    found: dict[str, list[Off]] = {}
    for s in scores:
        ratio = s.vs_cohort
        if s.figure.judged and ratio is not None and ratio < 1 - tolerance:
            text = (
                f"{s.figure.label} {_short(s.value)} {s.figure.unit}, {_below(ratio)} the median "
                f"of its model's GPUs in the run ({_short(s.cohort_median or 0)})"
            )
            found.setdefault(s.gpu, []).append((ratio, text, s.figure.short))
    return findings(found)


# ------------------------------------------------------------------------------ pairs


@dataclass(frozen=True)
class PairScore:
    pair: str
    figure: Figure
    value: float
    host_median: float

    @property
    def vs_host_median(self) -> float:
        return self.value / self.host_median if self.host_median > 0 else 1.0


def score_pairs(data: Mapping[str, Any]) -> list[PairScore]:
    pairs = pairs_of(data)
    scores = []
    for figure in PAIR_FIGURES:
        measured = [(p, v) for p, v in ((p, figure_of(p, figure)) for p in pairs) if v is not None]
        if not measured:
            continue
        middle = float(statistics.median(v for _, v in measured))
        scores += [PairScore(pair_label(p), figure, v, middle) for p, v in measured]
    return scores


def slow_pairs(scores: Sequence[PairScore], tolerance: float) -> list[str]:
    found: dict[str, list[Off]] = {}
    for s in scores:
        if s.vs_host_median < 1 - tolerance:
            text = (
                f"{s.figure.label} {_short(s.value)} {s.figure.unit}, {_below(s.vs_host_median)} "
                f"the host's median pair ({_short(s.host_median)})"
            )
            found.setdefault(s.pair, []).append((s.vs_host_median, text, s.figure.short))
    return findings(found)


def pairs_judgeable(data: Mapping[str, Any]) -> bool:
    """Every pair has every figure any pair has, and there is at least one figure."""
    pairs = pairs_of(data)
    if not pairs:
        return False
    had = [f for f in PAIR_FIGURES if any(figure_of(p, f) is not None for p in pairs)]
    return bool(had) and all(figure_of(p, f) is not None for p in pairs for f in had)


# ------------------------------------------------------------------------------ under load


def pcie_below_max(data: Mapping[str, Any]) -> list[str] | None:
    """GPUs whose PCIe link stayed below its max generation or width under load; None when a
    GPU's link could not be read under load."""
    found = []
    for gpu in gpus_of(data):
        load = gpu.get("load") or {}
        below = load.get("pcie_below_max")
        if below is None:
            return None
        if below:
            found.append(
                f"{gpu_label(gpu)}: PCIe Gen{load.get('pcie_gen')} x{load.get('pcie_width')} "
                f"under load ({load.get('pcie_read_during', 'load')}), max "
                f"Gen{load.get('pcie_gen_max')} x{load.get('pcie_width_max')}"
            )
    return found if gpus_of(data) else None


def hw_throttled(data: Mapping[str, Any]) -> list[str] | None:
    """GPUs held down by a hardware reason (HW slowdown, HW thermal slowdown, HW power brake)
    under load; None when a GPU's clock-event reasons could not be read under load."""
    found = []
    for gpu in gpus_of(data):
        load = gpu.get("load") or {}
        throttle = load.get("hw_throttle")
        if throttle is None:
            return None
        if throttle:
            reasons = [r for r in load.get("clock_events") or [] if str(r).startswith("hw_")]
            found.append(
                f"{gpu_label(gpu)}: {', '.join(reasons) or 'HW slowdown'} under load "
                f"({load.get('hw_throttle_samples')} of {load.get('samples')} samples)"
            )
    return found if gpus_of(data) else None


# ------------------------------------------------------------------------------ datasheets


def sheet_value(sheet: Datasheet, kind: str | None) -> float | None:
    if kind == "bf16":
        return sheet.bf16_tflops
    if kind == "memory":
        return sheet.memory_gbps
    if kind == "pcie":
        return sheet.pcie_gbps
    if kind == "peer":
        return sheet.nvlink_gbps if sheet.nvlink_gbps is not None else sheet.pcie_gbps
    return None


def percent_of(value: float, sheet: Datasheet | None, kind: str | None) -> float | None:
    reference = sheet_value(sheet, kind) if sheet is not None else None
    return round(100 * value / reference, 1) if reference else None


# ------------------------------------------------------------------------------ cohorts


def cohort_medians(datas: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per GPU model (its name), per figure, the median over every GPU of that model in `datas`
    (the gpubench data of every host of a run)."""
    values: dict[str, dict[str, list[float]]] = {}
    for data in datas:
        for gpu in gpus_of(data):
            model = values.setdefault(str(gpu.get("name")), {})
            for figure in GPU_FIGURES:
                value = figure_of(gpu, figure)
                if value is not None:
                    model.setdefault(figure.key, []).append(value)
    return {
        model: {key: float(statistics.median(v)) for key, v in figures.items()}
        for model, figures in values.items()
    }


def cohort_sizes(datas: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many GPUs of each model `datas` have (measured or not: one not measured makes its
    host's comparison unknown, not inapplicable)."""
    sizes: dict[str, int] = {}
    for data in datas:
        for gpu in gpus_of(data):
            sizes[str(gpu.get("name"))] = sizes.get(str(gpu.get("name")), 0) + 1
    return sizes


# ------------------------------------------------------------------------------ the summary


def summary(
    data: Mapping[str, Any],
    tolerance: float = DEFAULT_GPU_TOLERANCE,
    pair_tolerance: float = DEFAULT_PAIR_TOLERANCE,
    cohort: Mapping[str, Mapping[str, float]] | None = None,
    cohort_size: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """What rules read as `_gpubench` (docs/rules.md): each GPU and pair scored, and the lists
    the inference pack's gpubench-* rules judge (null: not judgeable here)."""
    gpus = gpus_of(data)
    scores = score_gpus(data, cohort)
    pair_scores = score_pairs(data)
    missing = unmeasured(data)
    judgeable = bool(scores) and not missing
    models = {str(g.get("name")) for g in gpus}
    return {
        "gpu_count": len(gpus),
        "tolerance": tolerance,
        "pair_tolerance": pair_tolerance,
        "stopped_early": bool(data.get("stopped_early")),
        "stopped": data.get("stopped"),
        "pairs_note": data.get("pairs_note"),
        "gpus": [_gpu_summary(gpu, scores) for gpu in gpus],
        "pairs": [_pair_summary(pair, pair_scores, gpus) for pair in pairs_of(data)],
        "unmeasured": missing,
        "slow_gpus": slow_gpus(scores, tolerance) if judgeable else None,
        "slow_pairs": slow_pairs(pair_scores, pair_tolerance) if pairs_judgeable(data) else None,
        "pcie_below_max": pcie_below_max(data),
        "hw_throttled": hw_throttled(data),
        "slow_vs_cohort": slow_vs_cohort(scores, tolerance)
        if judgeable and cohort is not None
        else None,
        "cohort_gpus": min((cohort_size or {}).get(m, 0) for m in models) if models else 0,
    }


def _gpu_summary(gpu: Mapping[str, Any], scores: Sequence[GpuScore]) -> dict[str, Any]:
    label = gpu_label(gpu)
    sheet = datasheet_for(gpu.get("name"))
    figures = {}
    for s in scores:
        if s.gpu == label:
            figures[s.figure.key] = {
                "value": s.value,
                "unit": s.figure.unit,
                "host_best": s.host_best,
                "vs_host_best": round(s.vs_host_best, 4),
                "cohort_median": s.cohort_median,
                "vs_cohort": None if s.vs_cohort is None else round(s.vs_cohort, 4),
                "pct_of_datasheet": percent_of(s.value, sheet, s.figure.sheet),
            }
    load = gpu.get("load") or {}
    return {
        "gpu": label,
        "index": gpu.get("index"),
        "uuid": gpu.get("uuid"),
        "pci_bus_id": gpu.get("pci_bus_id"),
        "name": gpu.get("name"),
        "datasheet": sheet.model if sheet else None,
        "figures": figures,
        "pcie_below_max": load.get("pcie_below_max"),
        "hw_throttle": load.get("hw_throttle"),
    }


def _pair_summary(
    pair: Mapping[str, Any], scores: Sequence[PairScore], gpus: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    label = pair_label(pair)
    source = next((g for g in gpus if g.get("index") == pair.get("src")), {})
    sheet = datasheet_for(source.get("name"))
    return {
        "pair": label,
        "peer_access": pair.get("peer_access"),
        "figures": {
            s.figure.key: {
                "value": s.value,
                "host_median": s.host_median,
                "vs_host_median": round(s.vs_host_median, 4),
                "pct_of_datasheet": percent_of(s.value, sheet, s.figure.sheet),
            }
            for s in scores
            if s.pair == label
        },
    }


def off(summary_: Mapping[str, Any]) -> list[str]:
    """What is off on one host, one line each (the terminal shows only these): slow GPUs and
    pairs, links and clocks under load, figures not measured, a stop at the budget."""
    lines = []
    for key, what in (
        ("slow_gpus", "slow GPU"),
        ("slow_pairs", "slow pair"),
        ("pcie_below_max", "PCIe link down"),
        ("hw_throttled", "HW throttle"),
    ):
        lines += [f"{what}: {line}" for line in summary_.get(key) or []]
    named = {line.split(": ")[0] for line in summary_.get("slow_gpus") or []}
    lines += [  # a GPU slow on its host is slow against its cohort too: said once
        f"below its cohort: {line}"
        for line in summary_.get("slow_vs_cohort") or []
        if line.split(": ")[0] not in named
    ]
    lines += [f"not measured: {line}" for line in summary_.get("unmeasured") or []]
    if summary_.get("stopped_early"):
        lines.append(f"stopped early: {summary_.get('stopped')}")
    return lines


def measurements(data: Mapping[str, Any]) -> dict[str, float]:
    """The measurements the diff compares within cohorts (fleet/analysis/facts.py): each figure's
    slowest GPU, and the slowest pair one way."""
    found: dict[str, float] = {}
    for figure in GPU_FIGURES[:6]:
        values = [v for v in (figure_of(g, figure) for g in gpus_of(data)) if v is not None]
        if values:
            unit = "tflops" if figure.unit == "TFLOPS" else "gbps"
            found[f"gpubench slowest GPU {figure.field}_{unit}"] = min(values)
    one_way = [v for v in (figure_of(p, PAIR_FIGURES[0]) for p in pairs_of(data)) if v is not None]
    if one_way:
        found["gpubench slowest pair one_way_gbps"] = min(one_way)
    return found
