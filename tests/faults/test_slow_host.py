"""One host far slower than the rest (a delaying TCP proxy: this kernel has no netem): the others
finish on their own time, and the run ends by the deadline."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import NetFaults, inventory_for
from tests.integration.conftest import run_fleet
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults

DEADLINE_S = 10


def test_one_slow_host_holds_up_no_one_and_the_run_ends_by_the_deadline(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any, net: NetFaults
) -> None:
    fast = [fresh_host("fast") for _ in range(3)]
    slow = fresh_host("slow")
    server = farm.hosts[slow]
    address, port = net.slow_proxy((server.address, server.port), delay_s=0.25)
    inventory = inventory_for(farm, tmp_path, fast, {slow: {"address": address, "port": port}})
    (tmp_path / "known_hosts").open("a").write(f"[{address}]:{port} {server.host_key_pub}\n")

    started = time.monotonic()
    result = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "-t", str(DEADLINE_S)
    )
    wall = time.monotonic() - started

    fast_elapsed = [result.host(n)["elapsed_s"] for n in fast]
    assert [result.status(n) for n in fast] == ["ok"] * 3, result.stdout
    slow_outcome = result.host(slow)
    assert slow_outcome["status"] in ("ok", "timeout"), slow_outcome
    assert slow_outcome["elapsed_s"] > 5 * max(fast_elapsed), (slow_outcome, fast_elapsed)
    assert slow_outcome["elapsed_s"] <= DEADLINE_S + 1
    # from the first connection to the last outcome: bounded by the deadline
    document = result.document
    assert seconds_between(document["started"], document["finished"]) < DEADLINE_S + 6
    assert wall < DEADLINE_S + 60  # and no hang beyond it, whatever the machine's load
    assert len(list((result.state_dir / "fleet" / "runs").glob("*.json"))) == 1


def seconds_between(start: str, end: str) -> float:
    parse = lambda stamp: datetime.fromisoformat(stamp.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()
