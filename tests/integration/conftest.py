"""Integration fixtures: a farm of real sshd hosts; running `fleet` against them is
tests/integration/fleet_runs.py (plain Python: bench/ scripts use it without pytest), its names
also importable from here."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.integration.fleet_runs import (
    FleetResult,
    closed_port,
    divergence_block,
    finding_lines,
    fleet_invocation,
    fleet_result,
    run_fleet,
    ssh_host,
    ssh_target,
    write_inventory,
)
from tests.integration.sshd import SshdFarm, find_sshd

__all__ = [
    "FleetResult",
    "closed_port",
    "divergence_block",
    "farm",
    "finding_lines",
    "fleet_invocation",
    "fleet_result",
    "run_fleet",
    "ssh_host",
    "ssh_target",
    "write_inventory",
]


@pytest.fixture(scope="session")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdFarm]:
    sshd = find_sshd()
    if sshd is None:
        if os.environ.get("CI"):
            pytest.fail("sshd is missing in CI: .ci/run must apt-get install openssh-server")
        pytest.skip("no sshd here: apt-get install -y openssh-server")
    started = SshdFarm(tmp_path_factory.mktemp("sshd"), sshd)
    yield started
    started.stop()
