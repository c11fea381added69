"""The real 2× H200 run (tests/probes/golden/real_run/h200x2_run.json) and fleets built from it,
one thing changed per variant: shared by the unit, CLI and probe tests."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

from fleet.models import Run
from tests.conftest import ROOT

REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x2_run.json"
GOLDEN_GPU = ROOT / "tests" / "probes" / "golden" / "gpu"
GOLDEN_HEALTH = ROOT / "tests" / "probes" / "golden" / "health"
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
Host = dict[str, Any]

# The fields each probe's data has in the real run: what the rules and the diff may rely on.
CONTRACT = {
    "system": {"hostname", "os", "kernel", "cpu_count", "python"},
    "packages": {"packages"},
    "imports": {"results"},
    "dir": {"modules"},
    "gpu": {
        "driver_version",
        "cuda_driver_version",
        "gpus",
        "topology",
        "p2p_read",
        "interconnect",
    },
    "torch": {
        "version",
        "cuda",
        "cudnn",
        "nccl_version",
        "arch_list",
        "cuda_available",
        "device_count",
        "devices",
        "p2p_access",
        "symmetric_memory",
        "triton_version",
    },
    "nccl": {"env", "conf_files", "libraries", "torch_nccl_version"},
    "allreduce": {"backend", "world_size", "nccl_version", "env_overrides", "results"},
}


def real_host() -> Host:
    """The real H200 host's outcome document (a fresh copy each time)."""
    return copy.deepcopy(json.loads(REAL_RUN.read_text())["hosts"]["local"])


def data(host: Host, probe: str) -> dict[str, Any]:
    return host["probes"][probe]["data"]  # type: ignore[no-any-return]


def sm120_without_arch(host: Host) -> Host:
    """An RTX PRO 6000 (SM120) PCIe box whose torch 2.7.0+cu126 has no sm_120 kernels."""
    name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    gpu = data(host, "gpu")
    for item in gpu["gpus"]:
        item.update(name=name, compute_capability="12.0")
    gpu["interconnect"] = "pcie"
    torch = data(host, "torch")
    torch.update(version="2.7.0+cu126", cuda="12.6", arch_list=["sm_80", "sm_86", "sm_90"])
    for device in torch["devices"]:
        device.update(name=name, capability="12.0", arch_supported=False, arch_matched=None)
    return host


def nccl_p2p_disabled(host: Host) -> Host:
    data(host, "nccl")["env"]["NCCL_P2P_DISABLE"] = "1"
    return host


def slow_allreduce(host: Host) -> Host:
    """Three times slower than its twins: latency ×3, bandwidth ÷3."""
    for row in data(host, "allreduce")["results"]:
        row["latency_us"] *= 3
        row["busbw_gbps"] /= 3
    return host


def make_run(**hosts: Host) -> Run:
    document = json.loads(REAL_RUN.read_text())
    document["hosts"] = hosts
    return Run.from_dict(document)


def variant_fleet() -> Run:
    return make_run(
        **{
            "h200-a": real_host(),
            "h200-b": real_host(),
            "h200-c": real_host(),
            "sm120": sm120_without_arch(real_host()),
            "p2p-off": nccl_p2p_disabled(real_host()),
            "slow": slow_allreduce(real_host()),
        }
    )


def rtx_pcie_host() -> Host:
    """The real H200 host's probes with the real 8x RTX PRO 6000 PCIe nvidia-smi data, and a torch
    that has SM120 kernels (so only NCCL settings set these hosts apart)."""
    host = real_host()
    golden = json.loads((GOLDEN_GPU / "rtxpro6000x8_pcie" / "expected.json").read_text())
    host["probes"]["gpu"]["data"] = golden["probe_data"]
    torch = data(host, "torch")
    torch["arch_list"] = [*torch["arch_list"], "sm_120"]
    torch["devices"] = [
        {"index": i, "name": RTX, "capability": "12.0", "arch_supported": True} for i in range(8)
    ]
    torch["device_count"] = 8
    return host


def host_with_p2p(status_of_link: dict[str, str]) -> Host:
    """The RTX box with each pair's P2P status chosen by its topology link (PIX, NODE, SYS)."""
    host = rtx_pcie_host()
    gpu = data(host, "gpu")
    devices, matrix = gpu["topology"]["devices"], gpu["topology"]["matrix"]
    gpu["p2p_read"] = {
        row: {col: status_of_link[matrix[i][j]] for j, col in enumerate(devices) if i != j}
        for i, row in enumerate(devices)
    }
    return host


def h200_stack(folder: Path, health_case: str) -> Path:
    """A fake nvidia-smi's folder (FLEET_FAKE_GPU_DIR): the H200 pair's gpu captures, with the
    health probe's `-q -x` from `health_case` (h200x2: healthy; remap_pending_gpud80: sick)."""
    folder.mkdir(parents=True, exist_ok=True)
    for capture in (GOLDEN_GPU / "h200x2_nvlink").glob("nvidia-smi_*"):
        shutil.copy(capture, folder)
    shutil.copy(GOLDEN_HEALTH / "h200x2" / "nvidia-smi_nvlink_-s.txt", folder)
    shutil.copy(GOLDEN_HEALTH / health_case / "nvidia-smi_-q_-x.xml", folder)
    return folder
