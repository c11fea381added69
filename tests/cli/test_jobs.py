"""`fleet jobs` end to end: two hosts on this machine (the local transport, two names, two
loopback addresses), each with its own NCCL RAS server replaying captured NCCL 2.28.9 output
(tests/probes/ras_replay.py), the live probe pointed at it with the inventory's probe_args.

Host a's RAS answers with the 2.28.9 report whose missing rank lacks the comma after
"nvml_dev" (tests/probes/golden/live/ras/nccl2289_missing_rank_json): rank 0 on a, rank 1
missing, its address host b's. Host b's RAS answers with a 1-rank job of its own
(h200x1_1rank_json). Each host's probe reads an empty folder as /proc (probe option `proc`), so
neither sees this machine's processes, nor the other's: two machines as far as the probe can tell.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.inprocess import invoke
from tests.conftest import ROOT
from tests.probes.ras_replay import split_job_hosts
from tests.schema_check import errors

ADDRESSES = {"gpu-a": "127.0.0.2", "gpu-b": "127.0.0.3"}


@pytest.fixture
def two_hosts(tmp_path: Path) -> Iterator[Path]:
    """The inventory of two local hosts, each with its RAS replay running."""
    with split_job_hosts(ADDRESSES["gpu-a"], ADDRESSES["gpu-b"], tmp_path) as options:
        lines = ["hosts:"]
        for name, live in zip(("gpu-a", "gpu-b"), options):
            lines += [
                f"  {name}:",
                f"    address: {ADDRESSES[name]}",
                "    transport: local",
                f"    python: {sys.executable}",
                f"    probe_args: {{live: {json.dumps(live)}}}",
            ]
        inventory = tmp_path / "two.yaml"
        inventory.write_text("\n".join(lines) + "\n")
        yield inventory


def test_one_job_over_both_hosts_with_the_missing_rank_on_its_host(
    tmp_path: Path, two_hosts: Path
) -> None:
    written = tmp_path / "jobs.json"
    result = invoke(
        tmp_path, "jobs", "-i", str(two_hosts), "--no-save", "--json", str(written), columns=80
    )
    assert result.exit_code == 0, result.output
    document = json.loads(written.read_text())
    assert errors("jobs", document) == []
    jobs = {job["comm"]: job for job in document["jobs"]}
    job = jobs["0x44d8c595d392cba8"]
    assert job["hosts"] == ["gpu-a", "gpu-b"]
    assert job["reported_by"] == ["gpu-a"]
    assert [
        (r["rank"], r["host"], r["pid"], r["cuda_dev"], r["missing"]) for r in job["ranks"]
    ] == [
        (0, "gpu-a", 727, 0, None),
        (1, "gpu-b", 728, 1, "unresponsive"),
    ]
    assert job["blame"]["host"] == "gpu-b"
    (own,) = [j for comm, j in jobs.items() if comm != "0x44d8c595d392cba8"]
    assert own["hosts"] == ["gpu-b"]
    assert document["healthy"] is False
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    summary = next(line for line in lines if "0x44d8c595d392cba8" in line)
    assert "gpu-b: rank 1 missing" in summary
    assert "gpu-b: rank 1 pid 728 GPU 1: missing, unresponsive" in result.output


def test_the_saved_run_reads_the_same_and_leads_show_with_the_finding(
    tmp_path: Path, two_hosts: Path
) -> None:
    probed = invoke(tmp_path, "jobs", "-i", str(two_hosts), "--json", "-")
    assert probed.exit_code == 0, probed.output
    again = invoke(tmp_path, "jobs", "--run", "latest", "--json", "-")
    assert again.exit_code == 0, again.output
    first, second = (_document(r.stdout) for r in (probed, again))
    assert first["jobs"] == second["jobs"]
    assert second["run"]["location"].endswith(".json")
    shown = invoke(tmp_path, "show", "latest", columns=200)
    findings = shown.stdout.split("findings (")[1].split("key facts")[0]
    named = "✗ gpu-b rank 1 pid 728 GPU 1: NCCL job 0x44d8c595d392cba8: rank 1 on gpu-b: missing"
    assert named in findings
    assert "→ restart-app: restart the job" in findings
    # the live section of the report: the job in one line, its troubled host first
    live = shown.stdout.split("NCCL jobs: ")[1].splitlines()
    assert live[0].endswith("on gpu-a,gpu-b")
    assert live[1].startswith("  0x44d8c595d392cba8: gpu-b: rank 1 missing")  # trouble first


def test_the_html_report_has_the_jobs_section(tmp_path: Path, two_hosts: Path) -> None:
    invoke(tmp_path, "jobs", "-i", str(two_hosts))
    page = tmp_path / "page.html"
    result = invoke(tmp_path, "report", "latest", "-o", str(page))
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert '<section id="jobs">' in html
    assert "gpu-b: rank 1 of 0x44d8c595d392cba8: missing, unresponsive" in html


def test_a_run_without_the_live_probe_says_so(tmp_path: Path) -> None:
    run = ROOT / "tests" / "probes" / "golden" / "real_run" / "gpuless_local.json"
    result = invoke(tmp_path, "jobs", "--run", str(run))
    assert result.exit_code == 0
    assert "the live probe did not run here" in result.output


def test_jobs_of_the_real_h200_run_validate(tmp_path: Path) -> None:
    run = ROOT / "tests" / "probes" / "golden" / "live" / "h200x1" / "fleet_run_running.json"
    result = invoke(tmp_path, "jobs", "--run", str(run), "--json", "-")
    document = _document(result.stdout)
    assert errors("jobs", document) == []
    ((rank,),) = [job["ranks"] for job in document["jobs"]]
    assert (rank["host"], rank["pid"], rank["state"]) == ("local", 468, "S")


def _document(stdout: str) -> dict[str, Any]:
    """The JSON document on stdout (--json -): the tables went to stderr."""
    return json.loads(stdout)  # type: ignore[no-any-return]


def test_the_real_stopped_job_leads_with_a_finding_naming_its_process_and_gpu(
    tmp_path: Path,
) -> None:
    """The lent H200: a 1-rank NCCL job SIGSTOPped (bench/device_voice.py's capture)."""
    run = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x1_live_stopped_run.json"
    shown = invoke(tmp_path, "show", str(run), columns=80)
    findings = [line for line in shown.stdout.splitlines() if line.startswith("✗ ")]
    assert findings
    assert findings[0].startswith("✗ local pid 524: pid 524 on GPU-89824593")
    assert "→ restart-app" in shown.stdout.split("NCCL jobs")[0]
    jobs = invoke(tmp_path, "jobs", "--run", str(run), columns=80)
    assert "local: pid 524 on GPU-89824593" in " ".join(jobs.stdout.split())
