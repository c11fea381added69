"""An interpreter that hangs before Python runs a line of ours (a pyenv or conda shim waiting on
a lock, a `module` wrapper, a stuck automount): the host ends `timeout` with a message that says
so, and the host-side deadline (`timeout -k` around the interpreter, see
fleet.transport.launch.LAUNCH_WRAPPER) leaves nothing of it running, even where sshd refuses to
deliver the controller's signals (root sessions before OpenSSH 10, as in this farm)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from fleet.transport.ssh import SSHOptions, SSHTransport
from tests.faults.conftest import assert_nothing_left, inventory_for
from tests.integration.conftest import run_fleet, ssh_target
from tests.integration.sshd import SshdFarm
from tests.runner.conftest import run_probes
from tests.runner.helpers import GOOD

pytestmark = pytest.mark.faults

# A shim like pyenv's or conda's: a shell script that would exec the real interpreter, here stuck
# on a lock first. `sleep 3613` is its marker for pgrep.
HANGING_SHIM = """#!/bin/sh
sleep 3613
exec python3 "$@"
"""


def shim(tmp_path: Path, text: str = HANGING_SHIM) -> Path:
    path = tmp_path / "wrapped" / "python3"
    path.parent.mkdir()
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_interpreter_shim_that_hangs_ends_timeout_and_leaves_nothing(
    farm: SshdFarm, tmp_path: Path, fresh_host: Callable[..., str]
) -> None:
    name = fresh_host("hung-shim")
    inventory = inventory_for(farm, tmp_path, [name], python=str(shim(tmp_path)))
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--timeout", "8")
    host = result.host(name)
    assert host["status"] == "timeout", host
    assert "did not start the probes" in host["error"], host
    assert "shim" in (host.get("hint") or ""), host
    assert_nothing_left(farm, name, "sleep 3613")


def test_without_coreutils_timeout_a_watchdog_ends_the_hung_shim(
    farm: SshdFarm, tmp_path: Path, fresh_host: Callable[..., str]
) -> None:
    """A host whose PATH has no `timeout` (busybox-like images): the wrapper's background
    watchdog kills the session's process group at the deadline instead."""
    bare = tmp_path / "bare-bin"  # sh and sleep, no timeout
    bare.mkdir()
    for tool in ("sh", "sleep"):
        (bare / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    name = fresh_host("no-timeout", {"PATH": str(bare)})
    python = shim(tmp_path, HANGING_SHIM.replace("3613", "3614"))
    inventory = inventory_for(farm, tmp_path, [name], python=str(python))
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--timeout", "8")
    assert result.status(name) == "timeout", result.host(name)
    assert_nothing_left(farm, name, "sleep 3614")


def test_interrupted_run_ends_the_hung_shim_over_a_second_channel(
    farm: SshdFarm, tmp_path: Path, fresh_host: Callable[..., str]
) -> None:
    """Ctrl-C long before any deadline: sshd will not deliver our signal to this root session,
    so the controller ends the process group the launch wrapper reported, over a new channel."""
    name = fresh_host("interrupted-shim")
    python = shim(tmp_path, HANGING_SHIM.replace("3613", "3615"))
    host = replace(ssh_target(farm, name, tmp_path), python=str(python))
    outcome = run_probes(
        {"good": GOOD},
        hosts=[host],
        transports={"ssh": SSHTransport(SSHOptions())},
        timeout_s=300.0,
        interrupt_after_s=2.0,
    )[name]
    assert outcome.status == "interrupted", outcome
    assert_nothing_left(farm, name, "sleep 3615")
