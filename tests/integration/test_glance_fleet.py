"""Issue 46's "Done when", for real: findings a person can act on at a glance. 8 loopback sshd
hosts replaying real captures (tests/integration/mixed_fleet.py GEFORCE8, g01-g08): 2× H200, and 2×
GeForce RTX 5090 boxes (GNS: the model has no P2P), one whose torch lacks sm_120, one with
NCCL_P2P_DISABLE=1 and NCCL_ALGO=Tree. At 80 columns: `fleet probe` ≤ 60 lines with every problem
host named in its first 25; `fleet check` ≤ 40 lines with every failing host in its first 12; no
finding over 4 lines; no line over 80 columns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

from tests.integration import mixed_fleet
from tests.integration.conftest import FleetResult, run_fleet
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration
WIDTH = 80
GEFORCE8 = mixed_fleet.GEFORCE8
NO_SM120, P2P_OFF = "g05", "g07"
FINDING = re.compile(r"^[✗!·] (?P<hosts>\S+?)(?: GPU\d+ \([^)]*\))?: ")


@pytest.fixture(scope="module")
def geforce(farm: SshdFarm, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FleetResult]:
    tmp_path = tmp_path_factory.mktemp("geforce")
    inventory = mixed_fleet.start_mixed_fleet(farm, tmp_path, subnet="127.0.46", stacks=GEFORCE8)
    return tmp_path, mixed_fleet.probe_mixed_fleet(tmp_path, inventory, columns=WIDTH)


def checked(tmp_path: Path, *args: str) -> FleetResult:
    run = str(tmp_path / "run.json")
    return run_fleet(tmp_path, "check", "--run", run, *args, env={"COLUMNS": str(WIDTH)})


def named(lines: list[str]) -> set[str]:
    """The hosts the findings among `lines` name, their folded names expanded."""
    found: set[str] = set()
    for line in lines:
        match = FINDING.match(line)
        if match:
            found.update(NodeSet(match["hosts"]))
    return found


def findings_block(lines: list[str]) -> list[list[str]]:
    """Each finding's lines: its mark at column 0, then its indented lines."""
    start = next(i for i, line in enumerate(lines) if line.startswith("findings ("))
    found: list[list[str]] = []
    for line in lines[start + 1 :]:
        if FINDING.match(line):
            found.append([line])
        elif found and line.startswith("    "):
            found[-1].append(line)
        else:
            break
    return found


def problem_hosts(tmp_path: Path, severities: tuple[str, ...]) -> set[str]:
    document = json.loads(checked(tmp_path, "--json", "-").stdout)
    return {h for f in document["findings"] if f["severity"] in severities for h in f["hosts"]}


def test_probe_is_short_and_names_every_problem_host_first(
    geforce: tuple[Path, FleetResult],
) -> None:
    tmp_path, result = geforce
    assert {result.status(h) for h in GEFORCE8} == {"ok"}, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 60, result.stdout
    # the one longer line is the saved run's path alone (the test's state folder is deep): a
    # path is never broken
    wide = [line.strip() for line in lines if len(line) > WIDTH]
    assert all(line.endswith(".json") and " " not in line for line in wide), wide
    problems = problem_hosts(tmp_path, ("error", "warning"))
    assert {NO_SM120, P2P_OFF, "g03", "g08"} <= problems
    assert problems <= named(lines[:25]), result.stdout
    assert all(len(finding) <= 4 for finding in findings_block(lines)), result.stdout


def test_check_is_short_and_names_every_failing_host_first(
    geforce: tuple[Path, FleetResult],
) -> None:
    tmp_path, _ = geforce
    done = checked(tmp_path)
    assert done.returncode == 32, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "✗ check failed: g[05,07] fail 5 error rule(s)"
    assert len(lines) <= 40, done.stdout
    assert [line for line in lines if len(line) > WIDTH] == []
    failing = problem_hosts(tmp_path, ("error",))
    assert failing == {NO_SM120, P2P_OFF}
    assert failing <= named(lines[:12]), done.stdout
    blocks = findings_block(lines)
    assert all(len(finding) <= 4 for finding in blocks), done.stdout
    text = "\n".join(" ".join(block) for block in blocks)
    assert "`pip install torch --index-url …/cu128`" in " ".join(text.split())  # whole command
    gns = next(" ".join(b) for b in blocks if "p2p-gpu-model-limit" in b[0])
    assert gns.startswith("! g[03-08]: p2p-gpu-model-limit: GPU0→GPU1: GNS; GPU1→GPU0: GNS")
    assert "NCCL goes through host memory" in " ".join(gns.split())
