"""Helpers shared by test_fabric_netns.py and the tests beside it: one test module never imports another
(tests/unit/test_test_layout.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.fabric.conftest import NetnsFleet
from tests.faults.conftest import wait_until
from tests.integration.conftest import run_fleet

SIZES = "8,64K,1M"


# A shaped host or link runs ~50x slower than the others at 1 MiB; this 2-core machine, shared with
# other jobs, makes healthy pairs vary up to ~3x. "Bad" here is more than 5x below the median.
TOLERANCE = ("--tolerance", "4")


QUICK = ("--backend", "gloo", "--sizes", SIZES, "--timeout", "40", "--join-timeout", "15")


def fabric(tmp_path: Path, inventory: Path, *args: str, timeout: float = 240) -> dict[str, Any]:
    out = tmp_path / "fabric.json"
    result = run_fleet(
        tmp_path,
        "fabric",
        "-i",
        str(inventory),
        *QUICK,
        "--json",
        str(out),
        *args,
        timeout=timeout,
    )
    assert out.exists(), f"no run document (exit {result.returncode}): {result.stderr}"
    document = json.loads(out.read_text())
    document["_exit"], document["_stdout"] = result.returncode, result.stdout
    return document


def measured(document: dict[str, Any]) -> str:
    """Each pair's busbw and the suspects, for a failing assertion's message."""
    lines = [
        f"{p['hosts']} {p['status']} {p['busbw_gbps']} {p['error']}"
        for p in document["fabric"]["pairs"]
    ]
    return "\n".join([*lines, *map(str, document["fabric"]["suspects"])])


def assert_nothing_left(fleet: NetnsFleet) -> None:
    for name in fleet.hosts:
        assert wait_until(lambda n=name: not fleet.pids_in(n), 10), (
            f"left running in {name}: {[_cmdline(p) for p in fleet.pids_in(name)]}"
        )
    # and pgrep, by the launcher's own text, finds no fleet interpreter in these namespaces
    ours = {os.stat(f"/run/netns/{netns}").st_ino for netns in fleet.hosts.values()}
    launched = subprocess.run(["pgrep", "-f", "fleet bundle"], capture_output=True, text=True)
    stray = [int(p) for p in launched.stdout.split() if _netns_inode(int(p)) in ours]
    assert stray == [], [_cmdline(p) for p in stray]


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"
