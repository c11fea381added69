"""`fleet check --openmetrics FILE` over real sshd hosts on loopback (issue 48): the file parses
with prometheus_client's own parser, has no duplicate series, and says what the run document
says. Three hosts: one replays a sick H200 pair (GPU1's row remap pending: the public capture
remap_pending_gpud80), one the same pair healthy, one simulated GPUs that gpubench measures."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet.store import read_run_file
from tests.conftest import FAKES
from tests.integration.conftest import run_fleet, ssh_host, write_inventory
from tests.integration.sshd import SshdFarm
from tests.recorded import h200_stack

pytestmark = pytest.mark.integration

SICK, HEALTHY, BENCH = "om-sick", "om-healthy", "om-bench"


def _envs(tmp_path: Path) -> dict[str, dict[str, str]]:
    path = "/usr/local/bin:/usr/bin:/bin"
    gpu = {"PATH": f"{FAKES / 'bin'}:{path}", "PYTHONPATH": str(FAKES / "stubs" / "torch_h200")}
    return {
        SICK: {
            **gpu,
            "FLEET_FAKE_GPU_DIR": str(h200_stack(tmp_path / "sick", "remap_pending_gpud80")),
        },
        HEALTHY: {**gpu, "FLEET_FAKE_GPU_DIR": str(h200_stack(tmp_path / "healthy", "h200x2"))},
        BENCH: {
            "PATH": f"{FAKES / 'gpubench_bin'}:{path}",
            "PYTHONPATH": str(FAKES / "stubs" / "torch_gpubench"),  # 2 simulated H200
        },
    }


@pytest.fixture(scope="module")
def metrics_run(
    farm: SshdFarm, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, dict[str, Any], dict[str, Any], str]:
    """(the check's result, its run document, its check document, the metrics file's text)."""
    tmp_path = tmp_path_factory.mktemp("openmetrics")
    envs = _envs(tmp_path)
    for index, (name, env) in enumerate(envs.items()):
        farm.start(name, f"127.0.48.{index + 1}", env)
    known = farm.known_hosts(tmp_path / "known_hosts", list(envs))
    inventory = write_inventory(
        tmp_path / "inv.yaml", farm, {n: ssh_host(farm, n) for n in envs}, known
    )
    folder = tmp_path / "textfile"
    folder.mkdir()
    metrics = folder / "fleet.prom"
    result = run_fleet(
        tmp_path, "check", "-i", str(inventory), "-p", "system,gpu,health", "--gpubench",
        "--quick", "--json", str(tmp_path / "check.json"), "--openmetrics", str(metrics),
    )  # fmt: skip
    check = json.loads((tmp_path / "check.json").read_text())
    run = read_run_file(Path(check["run"]["location"])).to_dict()  # its payloads in place
    assert sorted(os.listdir(folder)) == ["fleet.prom"], "the temporary file was renamed"
    assert metrics.stat().st_mode & 0o444 == 0o444, "the collector's user can read it"
    return result, run, check, metrics.read_text()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, labels), asserting none is there twice."""
    keys = [
        (sample.name, tuple(sorted(sample.labels.items())), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]
    counted = Counter((name, labels) for name, labels, _ in keys)
    assert [key for key, count in counted.items() if count > 1] == [], "duplicate series"
    return {(name, labels): value for name, labels, value in keys}


def _labels(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def test_every_finding_is_a_series_with_its_host_gpu_rule_severity_and_action(
    metrics_run,
) -> None:
    result, _, check, text = metrics_run
    samples = _samples(text)
    expected: Counter[tuple[tuple[str, str], ...]] = Counter()
    for finding in check["findings"]:
        gpus = list(dict.fromkeys(re.findall(r"\bGPU(\d+)\b", finding.get("where", "")))) or [""]
        for host in finding["hosts"]:
            for gpu in gpus:
                labels = _labels(
                    host=host,
                    gpu=gpu,
                    rule=finding["kind"],
                    severity=finding["severity"],
                    action=finding["action"],
                )
                expected[labels] += 1
    found = {labels: value for (name, labels), value in samples.items() if name == "fleet_finding"}
    assert found == {labels: float(count) for labels, count in expected.items()}
    sick = _labels(
        host=SICK, gpu="1", rule="health-row-remap", severity="error", action="reset-gpu"
    )
    assert found[sick] == 1.0, result.stdout


def _assert_health_figures(samples: dict, where: dict[str, str], gpu: dict) -> None:
    for scope in ("volatile", "aggregate"):
        for kind in ("corrected", "uncorrected"):
            key = ("fleet_gpu_ecc_errors_total", _labels(**where, type=kind, scope=scope))
            assert samples[key] == gpu["ecc"][scope][kind]
    rows = gpu["remapped_rows"]
    for kind in ("correctable", "uncorrectable"):
        key = ("fleet_gpu_remapped_rows", _labels(**where, type=kind))
        assert samples[key] == rows[kind]
    pending = samples[("fleet_gpu_remapped_rows_pending", _labels(**where))]
    assert pending == int(rows["pending"])
    for reason in gpu["clock_events"]["active"]:
        key = ("fleet_gpu_clock_event_active", _labels(**where, reason=reason))
        assert samples[key] == 1


def _assert_gpubench_figures(samples: dict, where: dict[str, str], gpu: dict) -> None:
    for dtype, tflops in gpu["tflops"].items():
        key = ("fleet_gpubench_matmul_operations_per_second", _labels(**where, dtype=dtype))
        assert samples[key] == tflops * 1e12
    for copy, gbps in gpu["gbps"].items():
        key = ("fleet_gpubench_copy_bytes_per_second", _labels(**where, copy=copy))
        assert samples[key] == gbps * 1e9


def test_figures_equal_the_run_document(metrics_run) -> None:
    result, run, _, text = metrics_run
    samples = _samples(text)
    assert samples[("fleet_run_exit_code", ())] == result.returncode
    finished = datetime.fromisoformat(run["finished"].replace("Z", "+00:00")).timestamp()
    assert samples[("fleet_run_timestamp_seconds", ())] == pytest.approx(finished)
    statuses = Counter(host["status"] for host in run["hosts"].values())
    for status, count in statuses.items():
        assert samples[("fleet_hosts", _labels(outcome=status))] == count
    checked = 0
    for host, outcome in run["hosts"].items():
        health = outcome["probes"].get("health") or {}
        for gpu in (health.get("data") or {}).get("gpus") or [] if health.get("ok") else []:
            _assert_health_figures(samples, {"host": host, "gpu": str(gpu["index"])}, gpu)
            checked += 1
        bench = outcome["probes"].get("gpubench") or {}
        for gpu in (bench.get("data") or {}).get("gpus") or [] if bench.get("ok") else []:
            _assert_gpubench_figures(samples, {"host": host, "gpu": str(gpu["index"])}, gpu)
            checked += 1
    assert checked == 2 + 2 + 2, "both H200 pairs' health and the simulated pair's gpubench"
    sick_pending = ("fleet_gpu_remapped_rows_pending", _labels(host=SICK, gpu="1"))
    assert samples[sick_pending] == 1
