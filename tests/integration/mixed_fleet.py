"""Issue 23's mixed fleet: 8 real sshd hosts on loopback with fake GPU stacks, two kinds of machine.

    h01-h02  2× H200 (NVLink), torch 2.11
    h03-h08  8× RTX PRO 6000 Blackwell (PCIe, SM120), torch 2.11, except
             h05  torch 2.6, whose arch list lacks sm_120 (it cannot run on its GPUs)
             h07  NCCL_P2P_DISABLE=1 and NCCL_ALGO=Tree (NCCL's transport changed on one host)

Each host's sshd gives it, through SetEnv, a fake `nvidia-smi` replaying a real capture
(tests/probes/golden/gpu/…) and a stub torch (tests/fakes/stubs/…). Used by the integration test
(tests/integration/test_mixed_fleet.py) and by bench/mixed_fleet.py, which records the golden run
tests/probes/golden/real_run/mixed8_loopback.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.integration.fleet_runs import FleetResult, run_fleet, ssh_host, write_inventory
from tests.integration.gpu_stacks import host_env
from tests.integration.sshd import SshdFarm

H200 = ("h200x2_nvlink", "torch_h200_symm", {})
BLACKWELL = ("rtxpro6000x8_pcie", "torch_sm120_211", {})
# host → (nvidia-smi capture, torch stub, extra environment)
MIXED8: dict[str, tuple[str, str, dict[str, str]]] = {
    "h01": H200,
    "h02": H200,
    "h03": BLACKWELL,
    "h04": BLACKWELL,
    "h05": ("rtxpro6000x8_pcie", "torch_sm120_26", {}),
    "h06": BLACKWELL,
    "h07": ("rtxpro6000x8_pcie", "torch_sm120_211", {"NCCL_P2P_DISABLE": "1", "NCCL_ALGO": "Tree"}),
    "h08": BLACKWELL,
}
NO_SM120, P2P_OFF = "h05", "h07"

# Issue 46's fleet: the same two odd hosts among GeForce boards. h03-h08 2× GeForce RTX 5090 (real
# captures: GNS for every pair, the model has no P2P), the same torch builds as MIXED8's
# Blackwell hosts (SM120 too) told they run on two RTX 5090s.
# Named g01-g08 (g05 without sm_120, g07 with the NCCL settings): both fleets share the farm.
RTX5090 = {"FLEET_FAKE_TORCH_GPUS": "2×NVIDIA GeForce RTX 5090"}
GEFORCE8: dict[str, tuple[str, str, dict[str, str]]] = {
    f"g{name[1:]}": (
        ("rtx5090x2_gns", stub, {**extra, **RTX5090}) if stub.startswith("torch_sm120") else stack
    )
    for name, stack in MIXED8.items()
    for _, stub, extra in [stack]
}


def start_mixed_fleet(
    farm: SshdFarm,
    tmp_path: Path,
    subnet: str = "127.0.23",
    stacks: Mapping[str, tuple[str, str, dict[str, str]]] = MIXED8,
) -> Path:
    """Start one sshd per host of `stacks`; return the inventory that reaches them."""
    for index, (name, (capture, stub, extra)) in enumerate(stacks.items()):
        farm.start(name, f"{subnet}.{index + 1}", host_env(capture, stub, extra))
    known = farm.known_hosts(tmp_path / "known_hosts", list(stacks))
    hosts = {name: ssh_host(farm, name) for name in stacks}
    return write_inventory(tmp_path / "inv.yaml", farm, hosts, known)


def probe_mixed_fleet(
    tmp_path: Path, inventory: Path, columns: int = 80, extra: Sequence[str] = ()
) -> FleetResult:
    """`COLUMNS=80 fleet probe --no-allreduce | cat` over the fleet (its run in tmp_path/run.json)."""
    return run_fleet(
        tmp_path,
        "probe",
        "-i",
        str(inventory),
        "--no-allreduce",
        *extra,
        env={"COLUMNS": str(columns)},
    )
