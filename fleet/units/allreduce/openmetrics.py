"""The allreduce probe's figures as Prometheus metrics (fleet.render.openmetrics writes them): bus
bandwidth at the largest message and latency at the smallest, per mode."""

from __future__ import annotations

from fleet.analysis.facts import is_number
from fleet.models import Run
from fleet.render.openmetrics import GIGA, MICRO, MetricFamily, probe_data
from fleet.units.allreduce.facts import allreduce_ends

PROBE = "allreduce"
METRICS: dict[str, tuple[str, str]] = {
    "fleet_allreduce_bus_bandwidth_bytes_per_second": (
        "gauge",
        "NCCL allreduce bus bandwidth at the largest message size, per mode.",
    ),
    "fleet_allreduce_latency_seconds": (
        "gauge",
        "NCCL allreduce latency at the smallest message size, per mode.",
    ),
}


def families(run: Run) -> list[MetricFamily]:
    busbw = MetricFamily.of("fleet_allreduce_bus_bandwidth_bytes_per_second")
    latency = MetricFamily.of("fleet_allreduce_latency_seconds")
    for host, data in probe_data(run, PROBE):
        for mode, (small, large) in allreduce_ends(data).items():
            if is_number(large.get("busbw_gbps")):
                size = str(large["bytes"])
                busbw.set(large["busbw_gbps"] * GIGA, host=host, mode=mode, message_bytes=size)
            if is_number(small.get("latency_us")):
                size = str(small["bytes"])
                latency.set(small["latency_us"] * MICRO, host=host, mode=mode, message_bytes=size)
    return [busbw, latency]
