"""The health probe's figures as Prometheus metrics (fleet.render.openmetrics writes them): ECC
errors, remapped rows, active clock-event reasons per GPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.analysis.facts import is_number
from fleet.models import Run
from fleet.render.openmetrics import MetricFamily, gpus, masked, probe_data

PROBE = "health"
METRICS: dict[str, tuple[str, str]] = {
    "fleet_gpu_ecc_errors": (
        "counter",
        "ECC errors nvidia-smi counts (scope volatile: since the driver loaded; aggregate: the GPU's life).",
    ),
    "fleet_gpu_remapped_rows": ("gauge", "Rows the GPU remapped, by error kind."),
    "fleet_gpu_remapped_rows_pending": ("gauge", "1: a row remap waits for a reset."),
    "fleet_gpu_row_remap_failure": ("gauge", "1: a row could not be remapped."),
    "fleet_gpu_clock_event_active": ("gauge", "1 for each clock-event reason active (NVML)."),
}


def families(run: Run) -> list[MetricFamily]:
    ecc = MetricFamily.of("fleet_gpu_ecc_errors")
    rows = MetricFamily.of("fleet_gpu_remapped_rows")
    pending = MetricFamily.of("fleet_gpu_remapped_rows_pending")
    failure = MetricFamily.of("fleet_gpu_row_remap_failure")
    clocks = MetricFamily.of("fleet_gpu_clock_event_active")
    for host, data in probe_data(run, PROBE):
        for gpu, facts in gpus(data):
            for scope in ("volatile", "aggregate"):
                counts = (facts.get("ecc") or {}).get(scope) or {}
                for kind in ("corrected", "uncorrected"):
                    if is_number(counts.get(kind)):
                        ecc.set(counts[kind], host=host, gpu=gpu, type=kind, scope=scope)
            _remapped(facts.get("remapped_rows"), host, gpu, rows, pending, failure)
            for reason in (facts.get("clock_events") or {}).get("active") or []:
                clocks.set(1, host=host, gpu=gpu, reason=masked(reason))
    return [ecc, rows, pending, failure, clocks]


def _remapped(
    remapped: Any,
    host: str,
    gpu: str,
    rows: MetricFamily,
    pending: MetricFamily,
    failure: MetricFamily,
) -> None:
    if not isinstance(remapped, Mapping):
        return
    for kind in ("correctable", "uncorrectable"):
        if is_number(remapped.get(kind)):
            rows.set(remapped[kind], host=host, gpu=gpu, type=kind)
    if isinstance(remapped.get("pending"), bool):
        pending.set(int(remapped["pending"]), host=host, gpu=gpu)
    if isinstance(remapped.get("failure"), bool):
        failure.set(int(remapped["failure"]), host=host, gpu=gpu)
