"""Worker processes (`--workers N`) that die or are interrupted mid-run.

Hosts are dealt to workers round robin, in the inventory's order: with two workers, the 1st and
3rd host go to worker 0, the 2nd and 4th to worker 1. A hanging host (an import that never
finishes, tests/faults/unfinished.py) keeps its worker busy while the others finish.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.faults.conftest import (
    Controller,
    _cmdline,
    assert_nothing_left,
    children_of,
    descendants,
    host_processes,
    inventory_for,
    start_fleet,
    wait_until,
)
from tests.faults.unfinished import HANGING_MODULE
from tests.integration.conftest import fleet_invocation
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults

SEED_MARK = "fleet.execution.seed"


def hanging_host(fresh_host: Any, tmp_path: Path, marker: int) -> str:
    stub = tmp_path / f"hanging-{marker}"
    stub.mkdir()
    (stub / "hangs_here.py").write_text(HANGING_MODULE.format(marker=marker))
    return str(fresh_host("hanging", {"PYTHONPATH": str(stub)}))


def workers_of(controller: Controller) -> list[int]:
    """The controller's worker processes: the seed's children (the seed is its child)."""
    seeds = [pid for pid in children_of(controller.process.pid) if SEED_MARK in _cmdline(pid)]
    return [pid for seed in seeds for pid in children_of(seed)]


def sleeping(farm: SshdFarm, host: str, marker: int) -> bool:
    return any(f"sleep {marker}" in _cmdline(pid) for pid in host_processes(farm, host))


def probe_args(inventory: Path) -> tuple[str, ...]:
    return ("probe", "-i", str(inventory), "-p", "system,imports", "--import", "hangs_here:X",
            "--workers", "2")  # fmt: skip


def test_a_worker_killed_mid_run_is_a_host_error_for_its_unfinished_hosts(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    fast = [fresh_host("fast") for _ in range(2)]
    hanging = hanging_host(fresh_host, tmp_path, 621)
    late = fresh_host("fast")  # worker 1's second host: it finishes before the worker dies
    inventory = inventory_for(farm, tmp_path, [fast[0], hanging, fast[1], late])
    controller = start_fleet(tmp_path, *probe_args(inventory))
    # worker 0 (both fast hosts) ends once they are done; worker 1 is left, on the hanging host
    assert wait_until(lambda: sleeping(farm, hanging, 621), 30), controller.finish(5).stderr
    assert wait_until(lambda: len(workers_of(controller)) == 1, 30), controller.finish(5).stderr
    assert wait_until(lambda: not any(host_processes(farm, h) for h in [*fast, late]), 15)
    (worker,) = workers_of(controller)
    os.kill(worker, signal.SIGKILL)
    result = controller.finish(60)

    assert result.returncode & 4, result.stderr  # a host error, as for an unreachable host
    assert result.returncode != 130
    assert [result.status(h) for h in [*fast, late]] == ["ok"] * 3, result.stderr
    assert result.status(hanging) == "unreachable"
    error = result.host(hanging)["error"]
    assert f"worker 1 (pid {worker})" in error, error
    assert "was killed by SIGKILL" in error, error
    saved = list((tmp_path / "state" / "fleet" / "runs").glob("*.json"))
    assert len(saved) == 1  # the run is kept, with every host
    assert "Traceback" not in result.stderr
    assert_nothing_left(farm, hanging, "sleep 621")  # its session died with its worker


@pytest.mark.parametrize("whom", ["controller", "process group"])
def test_ctrl_c_with_workers_exits_130_and_leaves_nothing_running(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any, whom: str
) -> None:
    marker = 622 if whom == "controller" else 623
    hanging = [hanging_host(fresh_host, tmp_path, marker + 10 * i) for i in range(2)]
    fast = [fresh_host("fast") for _ in range(2)]
    inventory = inventory_for(farm, tmp_path, [*hanging, *fast])  # one hanging host per worker
    command, env = fleet_invocation(tmp_path, probe_args(inventory))
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)  # fmt: skip
    controller = Controller(tmp_path, process)
    both_hang = lambda: all(sleeping(farm, h, marker + 10 * i) for i, h in enumerate(hanging))  # noqa: E731
    assert wait_until(both_hang, 30), controller.finish(5).stderr
    assert wait_until(lambda: not any(host_processes(farm, h) for h in fast), 15)
    ours = descendants(process.pid)
    assert len(workers_of(controller)) == 2
    if whom == "controller":
        controller.signal(signal.SIGINT)
    else:  # as a terminal's Ctrl-C: every process of the foreground group gets it
        os.killpg(process.pid, signal.SIGINT)
    started = time.monotonic()
    result = controller.finish(30)

    assert time.monotonic() - started < 15
    assert result.returncode == 130, result.stderr
    assert [result.status(h) for h in hanging] == ["interrupted"] * 2, result.stderr
    assert [result.status(h) for h in fast] == ["ok"] * 2
    assert result.host(hanging[0])["probes"]["system"]["status"] == "ok"  # what it had: kept
    assert "Traceback" not in result.stderr + result.stdout
    for index, host in enumerate(hanging):
        assert_nothing_left(farm, host, f"sleep {marker + 10 * index}")
    assert wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in ours), 10)


def test_each_worker_keeps_its_hosts_deadlines(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    hanging = hanging_host(fresh_host, tmp_path, 624)
    fast = fresh_host("fast")
    inventory = inventory_for(farm, tmp_path, [hanging, fast])
    result = start_fleet(tmp_path, *probe_args(inventory), "--timeout", "6").finish(60)

    assert result.status(hanging) == "timeout", result.stderr
    assert result.status(fast) == "ok"
    assert result.returncode & 8, result.stderr  # probe trouble, as in one process
    assert_nothing_left(farm, hanging, "sleep 624")


def test_a_killed_controller_leaves_no_worker_and_nothing_on_hosts(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    """SIGKILL to the controller: its workers see their stop pipe close, end their hosts'
    sessions and remote processes, and exit; nothing of the run is left anywhere."""
    hanging = [hanging_host(fresh_host, tmp_path, 625 + 10 * i) for i in range(2)]
    inventory = inventory_for(farm, tmp_path, hanging)
    controller = start_fleet(tmp_path, *probe_args(inventory))
    both_hang = lambda: all(sleeping(farm, h, 625 + 10 * i) for i, h in enumerate(hanging))  # noqa: E731
    assert wait_until(both_hang, 30), controller.finish(5).stderr
    ours = descendants(controller.process.pid)
    assert len(workers_of(controller)) == 2
    controller.process.kill()
    controller.finish(10)

    for index, host in enumerate(hanging):
        assert_nothing_left(farm, host, f"sleep {625 + 10 * index}")
    assert wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in ours), 15)
