"""The gpubench probe's figures as Prometheus metrics (fleet.render.openmetrics writes them): the
best matmul rate per data type and the copy rates, per GPU."""

from __future__ import annotations

from fleet.models import Run
from fleet.render.openmetrics import GIGA, TERA, MetricFamily, gpus, probe_data, scaled

PROBE = "gpubench"
METRICS: dict[str, tuple[str, str]] = {
    "fleet_gpubench_matmul_operations_per_second": (
        "gauge",
        "gpubench's best matmul rate per data type: floating-point operations per second.",
    ),
    "fleet_gpubench_copy_bytes_per_second": (
        "gauge",
        "gpubench's copy rates: memcpy (device), h2d and d2h (host to device and back).",
    ),
}


def families(run: Run) -> list[MetricFamily]:
    matmul = MetricFamily.of("fleet_gpubench_matmul_operations_per_second")
    copy = MetricFamily.of("fleet_gpubench_copy_bytes_per_second")
    for host, data in probe_data(run, PROBE):
        for gpu, facts in gpus(data):
            where = {"host": host, "gpu": gpu}
            scaled(matmul, facts.get("tflops"), TERA, where, "dtype")
            scaled(copy, facts.get("gbps"), GIGA, where, "copy")
    return [matmul, copy]
