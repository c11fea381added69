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

from fleet.analysis.facts import is_number
from fleet.findings.model import Finding
from fleet.models import HOST_STATUSES, Run
from fleet.redact import mask_secrets
from fleet.registry import parts

GPU_IN_WHERE = re.compile(r"\bGPU(\d+)\b")
TERA, GIGA, MICRO = 1e12, 1e9, 1e-6  # a unit's figures in base units (tera-ops, GB/s, µs)
Labels = tuple[tuple[str, str], ...]

# Every metric fleet writes: name → type and help (docs/metrics.md lists them with an example).
# The run's own and the findings'; each unit adds its probe's (fleet/units/PROBE/openmetrics.py).
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
}


@dataclass
class MetricFamily:
    """One metric: its name, type and help, and its samples (labels → value)."""

    name: str
    kind: str  # gauge | counter
    help: str
    samples: dict[Labels, float] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str) -> MetricFamily:
        kind, help_text = all_metrics()[name]
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


def masked(value: Any) -> str:
    return str(mask_secrets("" if value is None else str(value)))


def openmetrics_text(run: Run, findings: Iterable[Finding], exit_code: int) -> str:
    """The text of the metrics file: every family with samples, each with HELP and TYPE."""
    families = [
        *_run_families(run, exit_code),
        _finding_family(findings),
        *(family for _, unit in parts("openmetrics") for family in unit.families(run)),
    ]
    lines = [line for family in families if family.samples for line in family.lines()]
    return "\n".join(lines) + "\n"


def _seconds(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _run_families(run: Run, exit_code: int) -> list[MetricFamily]:
    started, finished = _seconds(run.started), _seconds(run.finished)
    when = MetricFamily.of("fleet_run_timestamp_seconds")
    took = MetricFamily.of("fleet_run_duration_seconds")
    if finished is not None:
        when.set(finished)
        if started is not None:
            took.set(finished - started)
    code = MetricFamily.of("fleet_run_exit_code")
    code.set(exit_code)
    hosts = MetricFamily.of("fleet_hosts")
    outcome = MetricFamily.of("fleet_host_outcome")
    for status in HOST_STATUSES:
        hosts.set(0, outcome=status)
    for name, host in run.hosts.items():
        hosts.add(1, outcome=host.status)
        outcome.set(1, host=masked(name), outcome=host.status)
    return [when, took, code, hosts, outcome]


def _finding_family(findings: Iterable[Finding]) -> MetricFamily:
    family = MetricFamily.of("fleet_finding")
    for finding in findings:
        gpus = list(dict.fromkeys(GPU_IN_WHERE.findall(finding.where))) or [""]
        for host in finding.hosts:
            for gpu in gpus:
                family.add(
                    1,
                    host=masked(host),
                    gpu=gpu,
                    rule=masked(finding.kind),
                    severity=finding.severity,
                    action=finding.action,
                )
    return family


def all_metrics() -> dict[str, tuple[str, str]]:
    """Every metric fleet writes: the run's and the findings' (METRICS), then each unit's."""
    units_metrics = (item for _, unit in parts("openmetrics") for item in unit.METRICS.items())
    return {**METRICS, **dict(units_metrics)}


def probe_data(run: Run, probe: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, host in run.hosts.items():
        result = host.probes.get(probe)
        if result is not None and result.status == "ok" and isinstance(result.data, Mapping):
            yield masked(name), result.data


def gpus(data: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for gpu in data.get("gpus") or []:
        if isinstance(gpu, Mapping) and isinstance(gpu.get("index"), int):
            yield str(gpu["index"]), gpu


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


def scaled(
    family: MetricFamily, values: Any, scale: float, where: Mapping[str, str], label: str
) -> None:
    """Each number of `values` (name → number) times `scale`, the name as `label`."""
    for name, value in (values if isinstance(values, Mapping) else {}).items():
        if is_number(value):
            family.set(value * scale, **where, **{label: masked(name)})
