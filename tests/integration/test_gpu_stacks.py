"""Issue 3's scenario: loopback hosts with different fake GPU stacks, one run, every divergence shown.

Each host is a real sshd whose SetEnv gives it a fake `nvidia-smi` replaying a real capture
(tests/probes/golden/gpu/…) and a stub `torch` (tests/fakes/stubs/…).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import (
    divergence_block,
    finding_lines,
    run_fleet,
    ssh_host,
    write_inventory,
)
from tests.integration.gpu_stacks import CANARY, host_env
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration

SYMM_SPEC = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"

# host → (nvidia-smi capture, torch stub, extra environment)
STACKS = {
    "nvl-1": ("h200x2_nvlink", "torch_h200_symm", {}),
    "nvl-2": ("h200x2_nvlink", "torch_h200_symm", {}),
    "nvl-3": ("h200x2_nvlink", "torch_h200_symm", {}),
    "symm-old": ("h200x2_nvlink", "torch_h200", {}),
    "p2p-off": ("h200x2_nvlink", "torch_h200_symm", {"NCCL_P2P_DISABLE": "1"}),
    "bw-pcie": ("rtxpro6000x8_pcie", "torch_sm120_ok", {}),
    "bw-noarch": ("rtxpro6000x8_pcie", "torch_sm120_noarch", {}),
}


@pytest.fixture(scope="module")
def stack_run(farm: SshdFarm, tmp_path_factory: pytest.TempPathFactory):
    tmp_path = tmp_path_factory.mktemp("stacks")
    for index, (name, (capture, stub, extra)) in enumerate(STACKS.items()):
        farm.start(name, f"127.0.6.{index + 1}", host_env(capture, stub, extra))
    known = farm.known_hosts(tmp_path / "known_hosts", list(STACKS))
    hosts = {name: ssh_host(farm, name) for name in STACKS}
    inventory = write_inventory(tmp_path / "inv.yaml", farm, hosts, known)
    return run_fleet(tmp_path, "probe", "-i", str(inventory), "--quick")


def data(result, host: str, probe: str) -> dict:
    return dict(result.host(host)["probes"][probe]["data"])


def test_every_host_is_reached_and_reports(stack_run) -> None:
    assert {stack_run.status(h) for h in STACKS} == {"ok"}, stack_run.stdout


def test_torch_without_sm120_is_shown(stack_run) -> None:
    devices = data(stack_run, "bw-noarch", "torch")["devices"]
    assert devices[0]["capability"] == "12.0"
    assert devices[0]["arch_supported"] is False
    assert data(stack_run, "bw-pcie", "torch")["devices"][0]["arch_supported"] is True
    # a finding, first: the torch of bw-noarch cannot run on its GPUs (its peer in the
    # Blackwell cohort, bw-pcie, can: a 1–1 split, yet the host is named)
    finding = finding_lines(stack_run.stdout, "bw-noarch")
    assert "torch 2.7.0+cu126 cannot run on its GPUs: its arch list lacks sm_120" in finding
    assert stack_run.stdout.index("✗ bw-noarch: torch 2.7.0") < stack_run.stdout.index("key facts")


def test_host_where_only_private_symmetric_memory_resolves_is_shown(stack_run) -> None:
    resolved = {h: data(stack_run, h, "imports")["results"][SYMM_SPEC]["resolved"] for h in STACKS}
    assert resolved["symm-old"] == "torch.distributed._symmetric_memory:_SymmetricMemory"
    assert resolved["nvl-1"] == "torch.distributed._symmetric_memory:SymmetricMemory"
    row = finding_lines(stack_run.stdout, "symm-old")
    assert "resolves to _SymmetricMemory (the rest of 2× H200: SymmetricMemory)" in row
    assert "nvl-1" not in row


def test_pcie_host_among_nvlink_hosts_is_shown(stack_run) -> None:
    assert data(stack_run, "nvl-1", "gpu")["interconnect"] == "nvlink"
    assert data(stack_run, "bw-pcie", "gpu")["interconnect"] == "pcie"
    # a cohort of its own: GPU model × count × interconnect; its hardware is one line, listed
    # fact by fact with --between
    assert "  8× RTX PRO 6000 Blackwell  bw-noarch,bw-pcie" in stack_run.stdout
    assert "2× H200 vs 8× RTX PRO 6000 Blackwell: " in stack_run.stdout
    assert "gpu.interconnect" not in stack_run.stdout
    between = run_fleet(
        Path(stack_run.state_dir).parent, "diff", "latest", "--between", "--format", "markdown"
    )
    assert "| `gpu.interconnect` | nvlink | pcie |" in between.stdout


def test_nccl_p2p_disable_host_is_shown(stack_run) -> None:
    assert data(stack_run, "p2p-off", "nccl")["env"]["NCCL_P2P_DISABLE"] == "1"
    row = finding_lines(stack_run.stdout, "p2p-off")
    assert "NCCL transport settings differ: NCCL_P2P_DISABLE=1" in row
    assert "(the rest of 2× H200: unset)" in row
    assert "→ fix-config: NCCL_P2P_DISABLE=1 on an NVLink host" in row  # what to do, under it
    in_cohort = divergence_block(stack_run.full_diff(), "torch.version")
    assert "on symm-old" not in in_cohort  # same torch as its cohort: only its class differs


def test_canary_is_nowhere(stack_run) -> None:
    texts = [stack_run.stdout, stack_run.stderr, json.dumps(stack_run.document)]
    texts += [p.read_text() for p in Path(stack_run.state_dir).rglob("*") if p.is_file()]
    assert not any(CANARY in text for text in texts)


def test_allreduce_skips_cleanly_on_stub_torch(stack_run) -> None:
    allreduce = stack_run.host("nvl-1")["probes"]["allreduce"]
    assert allreduce["status"] == "absent"
    assert allreduce["error"]
