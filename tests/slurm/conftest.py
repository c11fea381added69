"""A real 5-node Slurm cluster for the session: gpu-04 carries a different torch, gpu-05 is drained."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.conftest import FAKES, ROOT
from tests.slurm.cluster import NodeStack, SlurmCluster, missing_binaries

GOLDEN_GPU = ROOT / "tests" / "probes" / "golden" / "gpu"
DRAIN_REASON = "ECC errors on GPU1"


def node_stacks() -> dict[str, NodeStack]:
    """gpu-01..05 on 2×H200; gpu-04's torch has only the private _SymmetricMemory."""
    capture = GOLDEN_GPU / "h200x2_nvlink"
    stubs = FAKES / "stubs"
    return {
        f"gpu-0{i}": NodeStack(capture, stubs / ("torch_h200" if i == 4 else "torch_h200_symm"))
        for i in range(1, 6)
    }


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: .ci/run installs slurmctld, slurmd, slurm-client and munge as root")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    missing = missing_binaries()
    if missing:
        _skip_or_fail("no Slurm here: missing " + ", ".join(missing))
    if os.geteuid() != 0:
        _skip_or_fail("the test Slurm cluster runs slurmd as root (its daemons need it)")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"), node_stacks())
    try:
        cluster.start()
        cluster.drain("gpu-05", DRAIN_REASON)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The session's cluster, with no hung node and an empty launch log; checks that the test left
    no job and no task behind."""
    slurm_cluster.reset_launched()
    yield slurm_cluster
    for node in slurm_cluster.nodes:
        slurm_cluster.set_hang(node, False)
    slurm_cluster.wait_until_no_jobs()
    assert slurm_cluster.wait_until_no_tasks() == []
