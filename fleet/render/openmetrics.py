"""A run as Prometheus metrics (`--openmetrics FILE` of probe, check and show): the text format
node_exporter's textfile collector reads, written to a temporary file beside FILE and renamed
over it, so the collector never reads half a file.

One series per finding and host (and GPU, where the finding names one), the run's time and
exit code, hosts by outcome, and per host and GPU the health and speed figures a dashboard
plots: ECC error counts, remapped rows, active clock-event reasons, allreduce bus bandwidth
at the largest message and latency at the smallest, gpubench's matmul and copy rates. Names
follow Prometheus's rules: base units in the name (seconds, bytes, bytes per second), `_total`
only on counters. Label values are escaped, and masked like everything fleet shows (no secret
reaches a label). docs/metrics.md lists the set."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet.findings.model import Finding
from fleet.models import HOST_STATUSES, Run
from fleet.redact import mask_secrets
from fleet.units.allreduce.facts import allreduce_ends

GPU_IN_WHERE = re.compile(r"\bGPU(\d+)\b")
TERA, GIGA, MICRO = 1e12, 1e9, 1e-6
Labels = tuple[tuple[str, str], ...]

# Every metric fleet writes: name → type and help (docs/metrics.md lists them with an example).
METRICS: dict[str, tuple[str, str]] = {
    "fleet_run_timestamp_seconds": ("gauge", "When the run finished (Unix time)."),
    "fleet_run_duration_seconds": ("gauge", "How long the run took."),
    "fleet_run_exit_code": ("gauge", "The command's exit code (a bitmask)."),
    "fleet_hosts": ("gauge", "Hosts of the run by outcome."),
    "fleet_host_outcome": ("gauge", "1 for each host's outcome."),
    "fleet_finding": (
        "gauge",
        "Findings per host and GPU (gpu empty: the host): their number, usually 1.",
    ),
    "fleet_gpu_ecc_errors": (
        "counter",
        "ECC errors nvidia-smi counts (scope volatile: since the driver loaded; aggregate: the GPU's life).",
    ),
    "fleet_allreduce_bus_bandwidth_bytes_per_second": (
        "gauge",
        "NCCL allreduce bus bandwidth at the largest message size, per mode.",
    ),
    "fleet_allreduce_latency_seconds": (
        "gauge",
        "NCCL allreduce latency at the smallest message size, per mode.",
    ),
    "fleet_gpubench_matmul_operations_per_second": (
        "gauge",
        "gpubench's best matmul rate per data type: floating-point operations per second.",
    ),
    "fleet_gpubench_copy_bytes_per_second": (
        "gauge",
        "gpubench's copy rates: memcpy (device), h2d and d2h (host to device and back).",
    ),
    "fleet_gpu_remapped_rows": ("gauge", "Rows the GPU remapped, by error kind."),
    "fleet_gpu_remapped_rows_pending": ("gauge", "1: a row remap waits for a reset."),
    "fleet_gpu_row_remap_failure": ("gauge", "1: a row could not be remapped."),
    "fleet_gpu_clock_event_active": ("gauge", "1 for each clock-event reason active (NVML)."),
}


@dataclass
class Family:
    """One metric: its name, type and help, and its samples (labels → value)."""

    name: str
    kind: str  # gauge | counter
    help: str
    samples: dict[Labels, float] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str) -> Family:
        kind, help_text = METRICS[name]
        return cls(name, kind, help_text)

    def set(self, value: float, **labels: str) -> None:
        self.samples[tuple(labels.items())] = float(value)

    def add(self, value: float, **labels: str) -> None:
        key = tuple(labels.items())
        self.samples[key] = self.samples.get(key, 0.0) + float(value)

    def lines(self) -> Iterator[str]:
        sample = f"{self.name}_total" if self.kind == "counter" else self.name
        yield f"# HELP {sample} {self.help}"
        yield f"# TYPE {sample} {self.kind}"
        for labels, value in self.samples.items():
            yield f"{sample}{_labels(labels)} {_number(value)}"


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{escape(value)}"' for name, value in labels) + "}"


def escape(value: str) -> str:
    """A label value as the text format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def _masked(value: Any) -> str:
    return str(mask_secrets("" if value is None else str(value)))


def openmetrics_text(run: Run, findings: Iterable[Finding], exit_code: int) -> str:
    """The text of the metrics file: every family with samples, each with HELP and TYPE."""
    families = [
        *_run_families(run, exit_code),
        _finding_family(findings),
        *_health_families(run),
        *_allreduce_families(run),
        *_gpubench_families(run),
    ]
    lines = [line for family in families if family.samples for line in family.lines()]
    return "\n".join(lines) + "\n"


def _seconds(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _run_families(run: Run, exit_code: int) -> list[Family]:
    started, finished = _seconds(run.started), _seconds(run.finished)
    when = Family.of("fleet_run_timestamp_seconds")
    took = Family.of("fleet_run_duration_seconds")
    if finished is not None:
        when.set(finished)
        if started is not None:
            took.set(finished - started)
    code = Family.of("fleet_run_exit_code")
    code.set(exit_code)
    hosts = Family.of("fleet_hosts")
    outcome = Family.of("fleet_host_outcome")
    for status in HOST_STATUSES:
        hosts.set(0, outcome=status)
    for name, host in run.hosts.items():
        hosts.add(1, outcome=host.status)
        outcome.set(1, host=_masked(name), outcome=host.status)
    return [when, took, code, hosts, outcome]


def _finding_family(findings: Iterable[Finding]) -> Family:
    family = Family.of("fleet_finding")
    for finding in findings:
        gpus = list(dict.fromkeys(GPU_IN_WHERE.findall(finding.where))) or [""]
        for host in finding.hosts:
            for gpu in gpus:
                family.add(
                    1,
                    host=_masked(host),
                    gpu=gpu,
                    rule=_masked(finding.kind),
                    severity=finding.severity,
                    action=finding.action,
                )
    return family


def _data(run: Run, probe: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, host in run.hosts.items():
        result = host.probes.get(probe)
        if result is not None and result.status == "ok" and isinstance(result.data, Mapping):
            yield _masked(name), result.data


def _gpus(data: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for gpu in data.get("gpus") or []:
        if isinstance(gpu, Mapping) and isinstance(gpu.get("index"), int):
            yield str(gpu["index"]), gpu


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _health_families(run: Run) -> list[Family]:
    ecc = Family.of("fleet_gpu_ecc_errors")
    rows = Family.of("fleet_gpu_remapped_rows")
    pending = Family.of("fleet_gpu_remapped_rows_pending")
    failure = Family.of("fleet_gpu_row_remap_failure")
    clocks = Family.of("fleet_gpu_clock_event_active")
    for host, data in _data(run, "health"):
        for gpu, facts in _gpus(data):
            for scope in ("volatile", "aggregate"):
                counts = (facts.get("ecc") or {}).get(scope) or {}
                for kind in ("corrected", "uncorrected"):
                    if _is_number(counts.get(kind)):
                        ecc.set(counts[kind], host=host, gpu=gpu, type=kind, scope=scope)
            _remapped(facts.get("remapped_rows"), host, gpu, rows, pending, failure)
            for reason in (facts.get("clock_events") or {}).get("active") or []:
                clocks.set(1, host=host, gpu=gpu, reason=_masked(reason))
    return [ecc, rows, pending, failure, clocks]


def _remapped(
    remapped: Any, host: str, gpu: str, rows: Family, pending: Family, failure: Family
) -> None:
    if not isinstance(remapped, Mapping):
        return
    for kind in ("correctable", "uncorrectable"):
        if _is_number(remapped.get(kind)):
            rows.set(remapped[kind], host=host, gpu=gpu, type=kind)
    if isinstance(remapped.get("pending"), bool):
        pending.set(int(remapped["pending"]), host=host, gpu=gpu)
    if isinstance(remapped.get("failure"), bool):
        failure.set(int(remapped["failure"]), host=host, gpu=gpu)


def _allreduce_families(run: Run) -> list[Family]:
    busbw = Family.of("fleet_allreduce_bus_bandwidth_bytes_per_second")
    latency = Family.of("fleet_allreduce_latency_seconds")
    for host, data in _data(run, "allreduce"):
        for mode, (small, large) in allreduce_ends(data).items():
            if _is_number(large.get("busbw_gbps")):
                size = str(large["bytes"])
                busbw.set(large["busbw_gbps"] * GIGA, host=host, mode=mode, message_bytes=size)
            if _is_number(small.get("latency_us")):
                size = str(small["bytes"])
                latency.set(small["latency_us"] * MICRO, host=host, mode=mode, message_bytes=size)
    return [busbw, latency]


def _gpubench_families(run: Run) -> list[Family]:
    matmul = Family.of("fleet_gpubench_matmul_operations_per_second")
    copy = Family.of("fleet_gpubench_copy_bytes_per_second")
    for host, data in _data(run, "gpubench"):
        for gpu, facts in _gpus(data):
            where = {"host": host, "gpu": gpu}
            _scaled(matmul, facts.get("tflops"), TERA, where, "dtype")
            _scaled(copy, facts.get("gbps"), GIGA, where, "copy")
    return [matmul, copy]


def _scaled(
    family: Family, values: Any, scale: float, where: Mapping[str, str], label: str
) -> None:
    """Each number of `values` (name → number) times `scale`, the name as `label`."""
    for name, value in (values if isinstance(values, Mapping) else {}).items():
        if _is_number(value):
            family.set(value * scale, **where, **{label: _masked(name)})


def write_openmetrics(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically: a temporary file in the same folder (no `.prom`
    ending: the collector skips it), renamed over it. Readable by all (mode 0644): the
    collector runs as its own user, and the file holds no secret."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
