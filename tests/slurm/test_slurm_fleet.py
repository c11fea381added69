"""`fleet probe --slurm ...` against a real Slurm cluster (tests/slurm/cluster.py): 5 slurmd on one
machine, gpu-04 with a different torch stub, gpu-05 drained."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import (
    FleetResult,
    divergence_block,
    fleet_invocation,
    fleet_result,
    run_fleet,
)
from tests.slurm.cluster import SlurmCluster
from tests.slurm.conftest import DRAIN_REASON

pytestmark = pytest.mark.integration

USABLE = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]
FAST_PROBES = "system,gpu,torch,imports,dir"


def probe(cluster: SlurmCluster, tmp_path: Path, *args: str, timeout: float = 120) -> FleetResult:
    env = {"SLURM_CONF": str(cluster.conf)}
    return run_fleet(tmp_path, "probe", "--no-save", *args, env=env, timeout=timeout)


@pytest.fixture
def partition_run(cluster: SlurmCluster, tmp_path: Path) -> tuple[FleetResult, list[str]]:
    result = probe(cluster, tmp_path, "--slurm", "partition=gpu", "-p", FAST_PROBES)
    return result, cluster.launched()


def test_partition_probes_usable_nodes_in_one_allocation(partition_run) -> None:
    result, launched = partition_run
    assert result.returncode == 0, result.stderr  # an unavailable node sets no exit bit
    assert {n: result.status(n) for n in USABLE} == dict.fromkeys(USABLE, "ok")
    slurm = result.document["slurm"]
    assert result.document["transport"] == "slurm"
    assert slurm["target"] == "partition=gpu"
    jobs = {slurm["nodes"][n]["job_id"] for n in USABLE}
    assert slurm["job_id"]
    assert jobs == {slurm["job_id"]}, "one allocation for all nodes"
    assert {slurm["nodes"][n]["step_id"] for n in USABLE} == {slurm["step_id"]}
    assert sorted(launched) == USABLE


def test_drained_node_is_listed_with_reason_and_never_launched_on(partition_run) -> None:
    result, launched = partition_run
    assert "gpu-05" not in launched
    host = result.host("gpu-05")
    assert host["status"] == "unavailable"
    assert DRAIN_REASON in host["error"]
    assert host["probes"] == {}
    node = result.document["slurm"]["nodes"]["gpu-05"]
    assert node["state"] == "drained"
    assert node["reason"] == DRAIN_REASON
    assert node["launched"] is False
    assert node["usable"] is False
    assert (result.document["slurm"]["usable"], result.document["slurm"]["unavailable"]) == (4, 1)
    assert "4 hosts: 4 ok; 1 unavailable (gpu-05" in result.stdout


def test_torch_divergence_on_one_node_is_shown(partition_run) -> None:
    result, _ = partition_run
    block = divergence_block(result.full_diff(), "torch.symmetric_memory.class_name")
    assert "_SymmetricMemory on gpu-04" in block
    names = result.host("gpu-01")["probes"]["dir"]["data"]
    assert names, "long protocol lines (dir dumps) arrive whole through srun's labels"


def test_hung_interpreter_times_out_without_holding_the_others(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    cluster.set_hang("gpu-03", True)
    started = time.monotonic()
    result = probe(cluster, tmp_path, "--slurm", "partition=gpu", "-p", "system", "-t", "8")
    took = time.monotonic() - started
    assert result.status("gpu-03") == "timeout", result.host("gpu-03")
    assert "did not start the probes" in result.host("gpu-03")["error"]
    assert [result.status(n) for n in ("gpu-01", "gpu-02", "gpu-04")] == ["ok"] * 3
    assert result.returncode == 8
    assert took < 30, f"the hung node held the run for {took:.0f} s"
    assert cluster.wait_until_no_tasks() == [], "the hung task outlived the run"


def test_ctrl_c_cancels_the_step_and_leaves_no_task(cluster: SlurmCluster, tmp_path: Path) -> None:
    cluster.set_hang("gpu-02", True)  # keeps the step running until we interrupt it
    command, env = fleet_invocation(
        tmp_path,
        ["probe", "--no-save", "--slurm", "partition=gpu", "-p", "system", "-t", "120"],
        {"SLURM_CONF": str(cluster.conf)},
    )
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(lambda: len(cluster.launched()) == 4 and cluster.tasks_running(), 30)
    time.sleep(1.0)  # the other nodes finish; gpu-02 hangs
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    result = fleet_result(tmp_path, process.returncode, stdout.decode(), stderr.decode())
    assert result.returncode == 130, result.stderr
    assert result.status("gpu-02") == "interrupted"
    assert cluster.wait_until_no_tasks(10) == []
    cluster.wait_until_no_jobs(10)


def test_job_target_probes_exactly_that_jobs_nodes(cluster: SlurmCluster, tmp_path: Path) -> None:
    job = cluster.run(
        "sbatch", "--parsable", "-N2", "-w", "gpu-[02-03]", "-o", "/dev/null", "--wrap", "sleep 300"
    ).strip()
    try:
        _wait_for(
            lambda: cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING", 30
        )
        result = probe(cluster, tmp_path, "--slurm", f"job={job}", "-p", "system")
    finally:
        cluster.run("scancel", job)
    assert result.returncode == 0, result.stderr
    assert sorted(result.document["hosts"]) == ["gpu-02", "gpu-03"]
    slurm = result.document["slurm"]
    assert slurm["job_id"] == job
    assert "--overlap" in slurm["srun"]


def test_limit_narrows_the_nodes_and_site_args_reach_srun(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    result = probe(
        cluster,
        tmp_path,
        "--slurm",
        "nodes=gpu-[01-03]",
        "-l",
        "gpu-0[13]",
        "-p",
        "system",
        "--slurm-args",
        "--comment='fleet test'",
        "--slurm-gpus",
        "none",
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.document["hosts"]) == ["gpu-01", "gpu-03"]
    srun = result.document["slurm"]["srun"]
    assert "--comment=fleet test" in srun
    assert "--exclusive" not in srun
    assert sorted(cluster.launched()) == ["gpu-01", "gpu-03"]


def test_unknown_job_is_a_usage_error_naming_it(cluster: SlurmCluster, tmp_path: Path) -> None:
    result = probe(cluster, tmp_path, "--slurm", "job=999999")
    assert result.returncode == 2
    assert "999999" in result.stderr
    assert cluster.launched() == []


def _wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.2)


def test_srun_refusing_the_step_names_every_node_and_srun_s_words(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    result = probe(
        cluster,
        tmp_path,
        "--slurm",
        "nodes=gpu-[01-02]",
        "-p",
        "system",
        "--slurm-args",
        "--constraint=no-such-feature",
    )
    assert result.returncode == 4, result.stderr
    for node in ("gpu-01", "gpu-02"):
        host = result.host(node)
        assert host["status"] == "unreachable"
        assert f"{node} sent nothing" in host["error"]
        assert "srun" in host["error"]
    assert cluster.launched() == []
