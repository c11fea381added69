"""Hosts and probes that hang, freeze, crash or die: each costs only itself, what finished is
kept, and no process of ours is left on the host afterwards."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fleet.models import HostOutcome
from fleet.transport.ssh import SSHOptions, SSHTransport
from tests.faults.conftest import (
    _cmdline,
    assert_nothing_left,
    host_processes,
    signal_all,
    wait_until,
)
from tests.integration.conftest import ssh_target
from tests.integration.sshd import SshdFarm
from tests.runner.conftest import run_probes
from tests.runner.helpers import GOOD

pytestmark = pytest.mark.faults

# Each hangs on a `sleep` with its own odd duration: `pgrep -f "sleep 6xx"` finds it if it survives.
SLOW_AFTER_A_WHILE = """
import subprocess, time
TIMEOUT_S = 600
def collect(options):
    time.sleep(1.0)
    subprocess.Popen(["sleep", "{marker}"]).wait()
"""
HANGS_AT_IMPORT = """
TIMEOUT_S = 2
import subprocess
subprocess.Popen(["sleep", "{marker}"]).wait()
def collect(options):
    return {{"ok": True, "data": {{}}}}
"""
SEGFAULTS_AT_IMPORT = """
import ctypes
ctypes.string_at(0)
def collect(options):
    return {"ok": True, "data": {}}
"""
IGNORES_SIGTERM = """
import signal, subprocess, time
TIMEOUT_S = 2
def collect(options):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep {marker}"])
    while True:
        time.sleep(1)
"""


def probe_in_background(
    farm: SshdFarm, name: str, tmp_path: Path, probes: Mapping[str, str], **settings: Any
) -> Any:
    host = ssh_target(farm, name, tmp_path)
    pool = ThreadPoolExecutor(1)
    future = pool.submit(
        run_probes, probes, hosts=[host], transports={"ssh": SSHTransport(SSHOptions())}, **settings
    )
    pool.shutdown(wait=False)
    return future


def marker_running(farm: SshdFarm, name: str, marker: str) -> bool:
    return any(f"sleep {marker}" in _cmdline(p) for p in host_processes(farm, name))


def test_host_that_freezes_after_auth_times_out_and_keeps_finished_probes(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    name = fresh_host("freezes")
    probes = {"good": GOOD, "slow": SLOW_AFTER_A_WHILE.format(marker=601)}
    future = probe_in_background(farm, name, tmp_path, probes, timeout_s=8.0)
    assert wait_until(lambda: marker_running(farm, name, "601"), 10)
    frozen = host_processes(farm, name)  # its sshd session, the runner, the probes: all stopped
    signal_all(frozen, signal.SIGSTOP)
    started = time.monotonic()
    try:
        outcome: HostOutcome = future.result(30)[name]
    finally:
        signal_all(frozen, signal.SIGCONT)
    assert time.monotonic() - started < 15.0  # the 8 s deadline, not keepalive's 45 s
    assert outcome.status == "timeout", outcome
    assert outcome.probes["good"].status == "ok"
    assert "slow" in (outcome.error or "")
    assert_nothing_left(farm, name, "sleep 601")


def test_sshd_killed_mid_run_loses_the_host_but_keeps_finished_probes(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    name = fresh_host("sshd-killed")
    probes = {"good": GOOD, "slow": SLOW_AFTER_A_WHILE.format(marker=602)}
    future = probe_in_background(farm, name, tmp_path, probes, timeout_s=30.0)
    assert wait_until(lambda: marker_running(farm, name, "602"), 10)
    ours = host_processes(farm, name)
    sshd_pids = [p for p in ours if "sshd" in _cmdline(p)]
    listener = farm.hosts[name].process
    assert listener is not None
    assert sshd_pids
    listener.kill()
    signal_all(sshd_pids, signal.SIGKILL)
    started = time.monotonic()
    outcome: HostOutcome = future.result(30)[name]
    assert time.monotonic() - started < 10.0  # noticed at once, not at the 30 s deadline
    assert outcome.status == "partial", outcome
    assert "connection was lost" in (outcome.error or "")
    assert outcome.probes["good"].status == "ok"
    # the runner notices its closed channel at its next heartbeat and kills its probes
    assert wait_until(lambda: not [p for p in ours if _alive(p)], 10), [
        _cmdline(p) for p in ours if _alive(p)
    ]
    assert_nothing_left(farm, name, "sleep 602")


def test_probes_that_hang_or_crash_at_import_or_ignore_sigterm_cost_only_themselves(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    name = fresh_host("bad-probes")
    probes = {
        "good": GOOD,
        "hangs_at_import": HANGS_AT_IMPORT.format(marker=603),
        "segfaults_at_import": SEGFAULTS_AT_IMPORT,
        "ignores_sigterm": IGNORES_SIGTERM.format(marker=604),
    }
    outcome = run_probes(
        probes,
        hosts=[ssh_target(farm, name, tmp_path)],
        transports={"ssh": SSHTransport(SSHOptions())},
        timeout_s=20.0,
    )[name]
    results = outcome.probes
    assert outcome.status == "partial", outcome
    assert results["good"].status == "ok"
    assert results["hangs_at_import"].status == "timeout"
    assert "timed out after 2 s" in (results["hangs_at_import"].error or "")
    assert results["segfaults_at_import"].status == "failed"
    assert "SIGSEGV" in (results["segfaults_at_import"].error or "")
    assert results["ignores_sigterm"].status == "timeout"
    assert_nothing_left(farm, name, "sleep 60[34]")


def test_host_deadline_while_a_probe_ignores_sigterm_leaves_nothing(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    """The controller gives up on the host (its deadline) while a probe ignores SIGTERM."""
    name = fresh_host("deadline")
    stubborn = IGNORES_SIGTERM.replace("TIMEOUT_S = 2", "TIMEOUT_S = 600").format(marker=605)
    outcome = run_probes(
        {"good": GOOD, "stubborn": stubborn},
        hosts=[ssh_target(farm, name, tmp_path)],
        transports={"ssh": SSHTransport(SSHOptions())},
        timeout_s=7.0,
    )[name]
    assert outcome.status == "timeout", outcome
    assert outcome.probes["good"].status == "ok"
    assert_nothing_left(farm, name, "sleep 605")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_python_that_hangs_before_the_runner_starts_is_stopped_by_its_own_alarm(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    """A sitecustomize (or .pth file, or hung mount) that blocks Python's start: the controller
    gives up at its deadline, and the launcher's alarm, set before site-packages are imported,
    ends the interpreter even where sshd refuses to deliver signals (root before OpenSSH 10)."""
    site_dir = tmp_path / "hung-site"
    site_dir.mkdir()
    (site_dir / "sitecustomize.py").write_text("import time\ntime.sleep(3600)\n")
    name = fresh_host("hung-start", {"PYTHONPATH": str(site_dir)})
    outcome = run_probes(
        {"good": GOOD},
        hosts=[ssh_target(farm, name, tmp_path)],
        transports={"ssh": SSHTransport(SSHOptions())},
        timeout_s=7.0,
    )[name]
    assert outcome.status == "timeout", outcome
    assert "did not start" in (outcome.error or ""), outcome.error
    assert outcome.hint
    assert "sitecustomize" in outcome.hint
    assert_nothing_left(farm, name)
