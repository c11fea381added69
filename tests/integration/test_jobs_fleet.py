"""`fleet jobs` over real OpenSSH: two sshd hosts on loopback addresses, each host's live probe
pointed (by the inventory's probe_args) at its own NCCL RAS server replaying captured NCCL 2.28.9
output (tests/probes/ras_replay.py). Host a's report is the one whose missing rank lacks the comma
after "nvml_dev": rank 0 on a, rank 1 missing on b. Host b's is a 1-rank job of its own.

The same scene as tests/cli/test_jobs.py, there through the local transport; here each host is
reached as a real one is: by SSH, the probe shipped and run by the host's sshd, nothing left
behind. Each host reads an empty folder as /proc, so neither sees this machine's processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.conftest import assert_nothing_left
from tests.integration.conftest import run_fleet, ssh_host, write_inventory
from tests.integration.sshd import SshdFarm
from tests.probes.ras_replay import split_job_hosts
from tests.schema_check import errors

pytestmark = pytest.mark.integration

ADDRESSES = {"jobs-a": "127.0.63.2", "jobs-b": "127.0.63.3"}
JOB = "0x44d8c595d392cba8"


@pytest.fixture(scope="module")
def jobs_farm(farm: SshdFarm) -> SshdFarm:
    for name, address in ADDRESSES.items():
        if name not in farm.hosts:
            farm.start(name, address)
    return farm


@pytest.fixture
def inventory(jobs_farm: SshdFarm, tmp_path: Path) -> Iterator[Path]:
    with split_job_hosts(ADDRESSES["jobs-a"], ADDRESSES["jobs-b"], tmp_path) as options:
        hosts = {}
        for name, live in zip(ADDRESSES, options):
            hosts[name] = ssh_host(jobs_farm, name, probe_args={"live": live})
        known = jobs_farm.known_hosts(tmp_path / "known_hosts", list(ADDRESSES))
        yield write_inventory(tmp_path / "jobs.yaml", jobs_farm, hosts, known)


def test_one_job_over_two_ssh_hosts_names_the_missing_rank_on_its_host(
    inventory: Path, tmp_path: Path, jobs_farm: SshdFarm
) -> None:
    written = tmp_path / "jobs.json"
    result = run_fleet(tmp_path, "jobs", "-i", str(inventory), "--json", str(written))
    assert written.exists(), result.stderr
    document = json.loads(written.read_text())
    assert errors("jobs", document) == []
    jobs = {job["comm"]: job for job in document["jobs"]}
    job = jobs[JOB]
    assert job["hosts"] == ["jobs-a", "jobs-b"]
    assert job["reported_by"] == ["jobs-a"]
    ranks = [(r["rank"], r["host"], r["pid"], r["cuda_dev"], r["missing"]) for r in job["ranks"]]
    assert ranks == [(0, "jobs-a", 727, 0, None), (1, "jobs-b", 728, 1, "unresponsive")]
    assert job["blame"]["host"] == "jobs-b"
    (own,) = [j for comm, j in jobs.items() if comm != JOB]
    assert own["hosts"] == ["jobs-b"]
    assert document["healthy"] is False
    assert "jobs-b: rank 1 pid 728 GPU 1: missing, unresponsive" in result.stdout
    for name in ADDRESSES:
        assert_nothing_left(jobs_farm, name)
