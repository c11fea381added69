"""Issue 23's "Done when", for real: 8 loopback sshd hosts of two kinds (2× H200; 8× RTX PRO 6000
Blackwell, one whose torch lacks sm_120 and one with NCCL_P2P_DISABLE=1 and NCCL_ALGO=Tree),
`COLUMNS=80 fleet probe --no-allreduce | cat`, then `fleet diff RUN --format json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import FleetResult, finding_lines, run_fleet
from tests.integration.mixed_fleet import (
    MIXED8,
    NO_SM120,
    P2P_OFF,
    probe_mixed_fleet,
    start_mixed_fleet,
)
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration
WIDTH = 80


@pytest.fixture(scope="module")
def mixed(farm: SshdFarm, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FleetResult]:
    tmp_path = tmp_path_factory.mktemp("mixed")
    inventory = start_mixed_fleet(farm, tmp_path)
    return tmp_path, probe_mixed_fleet(tmp_path, inventory, columns=WIDTH)


def divergence(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("divergence: "))
    return lines[start:]


def test_every_host_reports(mixed: tuple[Path, FleetResult]) -> None:
    _, result = mixed
    assert {result.status(h) for h in MIXED8} == {"ok"}, result.stderr


def test_probe_output_is_short_and_fits_80_columns(mixed: tuple[Path, FleetResult]) -> None:
    _, result = mixed
    lines = result.stdout.splitlines()
    assert len(lines) <= 100, result.stdout
    too_wide = [line for line in lines if len(line) > WIDTH]
    assert all(len(line.split()) == 1 for line in too_wide), too_wide  # a name alone on its line


def test_the_two_real_problems_come_first(mixed: tuple[Path, FleetResult]) -> None:
    """Right under the hosts table, before any detail: the two odd hosts, each with its reason
    and what to do."""
    _, result = mixed
    lines = result.stdout.splitlines()
    table_end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    assert lines[table_end + 1] == "findings (2 errors, 1 info):", result.stdout
    errors = [line for line in lines if line.startswith("✗ ")]
    assert len(errors) == 2, result.stdout
    assert errors[0].startswith(f"✗ {NO_SM120}: torch 2.6.0+cu124 cannot run on its GPUs")
    assert errors[1].startswith(f"✗ {P2P_OFF}: NCCL transport settings differ: NCCL_ALGO=Tree")
    sm120 = " ".join(finding_lines(result.stdout, NO_SM120).split())
    assert "its arch list lacks sm_120" in sm120
    assert "→ fix-config: Install a torch build that includes that arch" in sm120
    assert "`pip install torch --index-url …/cu128`" in sm120  # the command, whole
    p2p = " ".join(finding_lines(result.stdout, P2P_OFF).split())
    assert "NCCL_P2P_DISABLE=1" in p2p
    assert "→ fix-config: h07: NCCL_ALGO=Tree, NCCL_P2P_DISABLE=1, where the other" in p2p
    # both before the detail: the key facts and the divergence follow them
    assert lines.index(errors[1]) < lines.index("key facts")
    head = divergence(result.stdout)[:30]
    text = "\n".join(head)
    assert head[0].startswith("divergence: 8 hosts · 2 cohorts · odd: h[05,07] · ")
    # the H200 pair is a cohort, not two odd hosts with 200 facts each
    assert "  2× H200  h[01-02]" in text
    assert "odd: h[01-02" not in text
    assert "hardware fact(s) differ, as" in result.stdout
    assert "every fact: fleet diff RUN (--between: the hardware ones too)" in result.stdout


def saved_diff(tmp_path: Path, *args: str) -> FleetResult:
    return run_fleet(tmp_path, "diff", str(tmp_path / "run.json"), *args)


def test_json_lists_every_differing_fact_tagged(mixed: tuple[Path, FleetResult]) -> None:
    tmp_path, _ = mixed
    done = saved_diff(tmp_path, "--json", "-")
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    assert document["schema"] == "fleet.diff/3"
    facts = [*document["values"], *document["sets"]]
    assert len(facts) > 200  # every differing fact, hardware ones too
    cohorts = {c["name"] for c in document["cohorts"]}
    for fact in facts:
        assert fact["within"] or fact["between"], fact["fact"]
        assert set(fact["within"]) <= cohorts
        assert all(set(pair) <= cohorts for pair in fact["between"])
    accounted = {name for finding in document["findings"] for name in finding["facts"]}
    assert {f["fact"] for f in facts} <= accounted
    ranks = [finding["rank"] for finding in document["findings"]]
    assert ranks == sorted(ranks)
    assert [f["kind"] for f in document["findings"][:3]] == ["arch", "nccl", "import"]


def test_between_lists_the_hardware_facts(mixed: tuple[Path, FleetResult]) -> None:
    tmp_path, _ = mixed
    done = saved_diff(tmp_path, "--between")
    assert done.returncode == 0, done.stderr
    assert "(8× RTX PRO 6000 Blackwell | 2× H200):" in done.stdout
    assert "    gpu.interconnect  pcie | nvlink" in done.stdout
    assert "    gpu.gpus[*].memory_mib  97887 | 143771 (2 facts)" in done.stdout
