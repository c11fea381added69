"""A saved run carries each probe's FACTS as shipped (the run's top-level `facts`), so show, diff,
report and check --run read it as it was probed, with the probe folder gone (issue 24, item 8)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from fleet import api
from fleet.execution.bundle import available_probes, facts_declaration
from tests.conftest import ROOT
from tests.helpers import invoke_fleet
from tests.schema_check import errors

# read_at differs on every host and in every run: declared volatile, it is never divergence
CLOCKS = '''"""Application clocks of every GPU (a site's own probe)."""

import time

FACTS = {"volatile": ["read_at"]}


def collect(options):
    return {"ok": True, "data": {"clocks_mhz": 1980, "read_at": time.time()}, "error": None}
'''
RULES = """rules:
  - id: clocks-high
    severity: error
    check: 'gpu_clocks.clocks_mhz >= `1900`'
    fix: raise the application clocks
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two hosts probed twice with the site's probe from --probe-dir; then the folder is gone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLEET_PROBE_DIR", raising=False)
    (tmp_path / "myprobes").mkdir()
    (tmp_path / "myprobes" / "gpu_clocks.py").write_text(CLOCKS)
    (tmp_path / "inv.yaml").write_text(
        "hosts:\n"
        f"  a: {{transport: local, python: {sys.executable}}}\n"
        f"  b: {{transport: local, python: {sys.executable}}}\n"
    )
    for _ in range(2):
        done = invoke_fleet(
            tmp_path,
            "probe",
            "-i",
            "inv.yaml",
            "--probe-dir",
            "myprobes",
            "-p",
            "system,gpu_clocks",
        )
        assert done.returncode == 0, done.stdout + done.stderr
    shutil.rmtree(tmp_path / "myprobes")
    return tmp_path


def latest(site: Path) -> Path:
    return api.resolve_run("latest", site / "state" / "fleet" / "runs")


def test_the_run_records_each_probe_s_facts_and_validates(site: Path) -> None:
    document = json.loads(latest(site).read_text())
    assert document["facts"]["gpu_clocks"] == {"volatile": ["read_at"]}
    assert document["facts"]["system"]["identity"] == ["hostname"]
    assert errors("run", document) == []


def test_show_and_diff_read_the_declaration_from_the_run(site: Path) -> None:
    diff = invoke_fleet(site, "diff", "latest", "--json", "-")
    assert diff.returncode == 0, diff.stderr
    assert "read_at" not in diff.stdout
    shown = invoke_fleet(site, "show")
    assert shown.returncode == 0, shown.stderr
    assert "read_at" not in shown.stdout


def test_drift_between_the_saved_runs_is_none(site: Path) -> None:
    drift = invoke_fleet(site, "diff", "previous", "latest", "--json", "-")
    assert "read_at" not in drift.stdout
    assert drift.returncode == 0, drift.stdout


def test_report_reads_the_declaration_from_the_run(site: Path) -> None:
    run = api.load_run(latest(site))
    assert not [f for f in api.cross_host_diff(run).values if "read_at" in f]
    done = invoke_fleet(site, "report", "-o", "page.html")
    assert done.returncode == 0, done.stderr
    assert "gpu_clocks.read_at" not in (site / "page.html").read_text()


def test_check_run_reads_a_probe_the_run_carries(site: Path) -> None:
    (site / "rules.yaml").write_text(RULES)
    done = invoke_fleet(site, "check", "--details", "--run", "latest", "--rules", "rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ pass clocks-high" in done.stdout


def test_a_rule_reading_an_unknown_probe_suggests_probe_dir(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    done = invoke_fleet(
        tmp_path, "check", "--details", "--rules", str(rules), "--no-save", "-p", "system"
    )
    assert done.returncode == 2
    assert "'gpu_clocks'" in done.stderr
    assert "--probe-dir" in done.stderr


def test_the_readme_example_probe_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "docs" / "probes.md").read_text(encoding="utf-8")
    example = readme.split("```python\n# myprobes/gpu_clocks.py\n", 1)[1].split("```", 1)[0]
    folder = tmp_path / "myprobes"
    folder.mkdir()
    (folder / "gpu_clocks.py").write_text(example)
    probe = available_probes([folder])["gpu_clocks"]
    assert probe.problem == ""
    assert facts_declaration(probe) == {"volatile": ["read_at"]}
    done = invoke_fleet(
        tmp_path, "probe", "--probe-dir", str(folder), "-p", "gpu_clocks", "--no-save",
        "--json", "-",
    )  # fmt: skip
    result = json.loads(done.stdout)["hosts"]["local"]["probes"]["gpu_clocks"]
    assert result["status"] in ("ok", "absent"), result  # absent: no nvidia-smi here


def test_report_rules_may_read_a_probe_the_run_carries(site: Path) -> None:
    (site / "rules.yaml").write_text(RULES)
    done = invoke_fleet(site, "report", "--rules", "rules.yaml", "-o", "page.html")
    assert done.returncode == 0, done.stderr
    assert "clocks-high" in (site / "page.html").read_text()
