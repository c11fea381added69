"""`--openmetrics`: the metric set follows Prometheus's naming rules, label values are escaped and
masked, and recorded real runs say in metrics what their documents say."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from fleet.findings.model import Finding
from fleet.models import Run
from fleet.render.openmetrics import all_metrics, openmetrics_text, write_openmetrics
from tests.conftest import ROOT

REAL_RUNS = ROOT / "tests" / "probes" / "golden" / "real_run"
# https://prometheus.io/docs/concepts/data_model/ and /docs/practices/naming/
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# base units only (seconds, bytes, celsius, …); a count of things names the things
BASE_UNITS = ("_seconds", "_bytes", "_bytes_per_second", "_operations_per_second", "_celsius")
NOT_BASE = ("_milliseconds", "_microseconds", "_kilobytes", "_megabytes", "_gigabytes", "_mhz")
UNITLESS = {  # counts, states (1 or 0) and codes: no unit to name
    "fleet_run_exit_code",
    "fleet_hosts",
    "fleet_host_outcome",
    "fleet_finding",
    "fleet_gpu_ecc_errors",
    "fleet_gpu_remapped_rows",
    "fleet_gpu_remapped_rows_pending",
    "fleet_gpu_row_remap_failure",
    "fleet_gpu_clock_event_active",
}


def load(name: str) -> Run:
    return Run.from_dict(json.loads((REAL_RUNS / name).read_text()))


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in found, f"duplicate series {key}"
            found[key] = sample.value
    return found


def test_names_follow_prometheus_naming_rules() -> None:
    for name, (kind, help_text) in all_metrics().items():
        assert METRIC_NAME.match(name), name
        assert name.startswith("fleet_"), "one prefix: the application's"
        assert kind in ("gauge", "counter")
        assert not name.endswith("_total"), "_total is added to a counter's samples, only there"
        assert name in UNITLESS or name.endswith(BASE_UNITS), f"{name}: no base unit named"
        assert not any(part in name for part in NOT_BASE), f"{name}: not a base unit"
        assert help_text.strip()
    text = openmetrics_text(load("h200x1_health_run.json"), [], 0)
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, sample, kind = line.split()
            assert sample.endswith("_total") == (kind == "counter"), line
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert all(LABEL_NAME.match(label) for label in sample.labels), sample
            assert not any(label.startswith("__") for label in sample.labels)


def test_label_values_are_escaped_and_secrets_masked() -> None:
    odd = 'rule "quoted" \\ back\nline'
    secret = "hf_" + "Zq" * 16
    findings = [
        Finding("error", odd, "what", ("h1",), action="drain", where="GPU0 (x), GPU3 (y)"),
        Finding("warning", f"token-{secret}", "what", ("h1",), action="fix-config"),
    ]
    text = openmetrics_text(load("h200x1_health_run.json"), findings, 32)
    assert secret not in text
    found = samples(text)
    for gpu in ("0", "3"):
        labels = (("action", "drain"), ("gpu", gpu), ("host", "h1"), ("rule", odd))
        assert found[("fleet_finding", (*labels[:3], labels[3], ("severity", "error")))] == 1
    assert found[("fleet_run_exit_code", ())] == 32


def test_a_recorded_run_s_figures_equal_its_document() -> None:
    run = load("h200x2_run.json")
    found = samples(openmetrics_text(run, [], 0))
    [(host, outcome)] = run.hosts.items()
    for mode in ("eager", "graph"):
        rows = [r for r in outcome.probes["allreduce"].data["results"] if r["mode"] == mode]
        large = max(rows, key=lambda r: r["bytes"])
        small = min(rows, key=lambda r: r["bytes"])
        labels = (("host", host), ("message_bytes", str(large["bytes"])), ("mode", mode))
        key = ("fleet_allreduce_bus_bandwidth_bytes_per_second", labels)
        assert found[key] == large["busbw_gbps"] * 1e9
        labels = (("host", host), ("message_bytes", str(small["bytes"])), ("mode", mode))
        assert found[("fleet_allreduce_latency_seconds", labels)] == small["latency_us"] * 1e-6
    bench = load("h200x1_gpubench_run.json")
    found = samples(openmetrics_text(bench, [], 0))
    [(host, outcome)] = bench.hosts.items()
    [gpu] = outcome.probes["gpubench"].data["gpus"]
    for dtype, tflops in gpu["tflops"].items():
        labels = (("dtype", dtype), ("gpu", "0"), ("host", host))
        assert found[("fleet_gpubench_matmul_operations_per_second", labels)] == tflops * 1e12


def test_the_file_is_replaced_atomically_and_readable_by_the_collector(tmp_path: Path) -> None:
    target = tmp_path / "fleet.prom"
    target.write_text("old\n")
    write_openmetrics(target, "fleet_run_exit_code 0\n")
    assert target.read_text() == "fleet_run_exit_code 0\n"
    assert [p.name for p in tmp_path.iterdir()] == ["fleet.prom"]
    assert target.stat().st_mode & 0o777 == 0o644


def test_docs_list_every_metric() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text()
    for name, (kind, _) in all_metrics().items():
        assert f"`{name}_total`" in text if kind == "counter" else f"`{name}`" in text, name
