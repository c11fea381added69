"""Deadlines and Ctrl-C over a real sshd: the remote runner and its probes must not outlive us."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleet.transport.ssh import SSHOptions, SSHTransport
from tests.integration.conftest import ssh_target
from tests.integration.sshd import SshdFarm
from tests.runner.conftest import run_probes
from tests.runner.helpers import GOOD, SPAWNS_AND_HANGS, alive, pids_in, sleepers

pytestmark = pytest.mark.integration


def test_probe_timeout_over_ssh_kills_probe_and_children(farm: SshdFarm, tmp_path: Path) -> None:
    farm.start("deadline-1", "127.0.4.1")
    host = ssh_target(farm, "deadline-1", tmp_path)
    outcomes = run_probes(
        {"good": GOOD, "spawner": SPAWNS_AND_HANGS.format(probe_timeout=2)},
        hosts=[host],
        transports={"ssh": SSHTransport(SSHOptions())},
    )
    outcome = outcomes["deadline-1"]
    assert outcome.status == "partial"
    assert outcome.probes["spawner"].status == "timeout"
    time.sleep(0.5)
    assert [p for p in pids_in(outcome.probes["spawner"].output_tail) if alive(p)] == []


def test_host_deadline_over_ssh_leaves_nothing_running(farm: SshdFarm, tmp_path: Path) -> None:
    farm.start("deadline-2", "127.0.4.2")
    host = ssh_target(farm, "deadline-2", tmp_path)
    # the probe prints its pids at once, then hangs past the host's deadline
    started = time.monotonic()
    outcomes = run_probes(
        {"spawner": SPAWNS_AND_HANGS.format(probe_timeout=600)},
        hosts=[host],
        transports={"ssh": SSHTransport(SSHOptions())},
        timeout_s=6.0,
    )
    assert outcomes["deadline-2"].status == "timeout"
    assert time.monotonic() - started < 12
    deadline = time.monotonic() + 5  # heartbeat EPIPE or the bundle's own alarm ends the runner
    while time.monotonic() < deadline and _sleep_600_alive():
        time.sleep(0.2)
    assert not _sleep_600_alive()


def test_interrupt_over_ssh_is_prompt(farm: SshdFarm, tmp_path: Path) -> None:
    farm.start("interrupt-1", "127.0.4.3")
    host = ssh_target(farm, "interrupt-1", tmp_path)
    slow = "import time\ndef collect(options):\n    time.sleep(600)\n"
    started = time.monotonic()
    outcomes = run_probes(
        {"good": GOOD, "slow": slow},
        hosts=[host],
        transports={"ssh": SSHTransport(SSHOptions())},
        interrupt_after_s=3.0,
    )
    assert time.monotonic() - started < 3.0 + 2.0
    assert outcomes["interrupt-1"].status == "interrupted"
    assert outcomes["interrupt-1"].probes["good"].status == "ok"


def _sleep_600_alive() -> bool:
    return bool(sleepers())
