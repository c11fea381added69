"""`fleet hosts --slurm`: a partition's nodes and their Slurm state, without launching anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import run_fleet
from tests.slurm.cluster import SlurmCluster
from tests.slurm.conftest import DRAIN_REASON

pytestmark = pytest.mark.integration


def test_hosts_lists_the_partition_with_each_node_s_state(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    env = {"SLURM_CONF": str(cluster.conf), "COLUMNS": "250"}
    launched_before = cluster.launched()
    result = run_fleet(tmp_path, "hosts", "--slurm", "partition=gpu", env=env)
    assert result.returncode == 0, result.stderr
    rows = {
        line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│ gpu-" in line
    }
    assert sorted(rows) == ["gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-05"]
    assert "slurm drained" in rows["gpu-05"]
    assert DRAIN_REASON in rows["gpu-05"]
    assert "not launched on" in rows["gpu-05"]
    assert "not launched on" not in rows["gpu-01"]
    assert cluster.launched() == launched_before  # listing asks slurmctld, runs nothing
