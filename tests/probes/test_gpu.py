"""The gpu probe: golden files from real nvidia-smi captures, and the probe run through a fake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes import gpu
from tests.conftest import REMOTE_PYTHON
from tests.probes.gpu_golden import GOLDEN, case_probe_data

REPO = Path(__file__).resolve().parents[2]
FAKE_BIN = REPO / "tests" / "fakes" / "bin"
PROBE = REPO / "probes" / "gpu.py"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "expected.json").is_file())


def parse_capture(path: Path):
    """Each capture is read by the parser for the command it is named after."""
    text = path.read_text()
    name = path.name
    if name == "nvidia-smi_query-gpu.csv":
        return gpu.parse_query_gpu(text)
    if name == "nvidia-smi_topo_-m.txt":
        return gpu.parse_topology(text)
    if name.startswith("nvidia-smi_topo_-p2p_"):
        return gpu.parse_p2p(text)
    if name == "nvidia-smi_-q.txt":
        return gpu.parse_versions(text)
    raise AssertionError(f"no parser for capture {name}")


def captures(case: str) -> list[Path]:
    return sorted(
        path
        for path in (GOLDEN / case).iterdir()
        if path.name.startswith("nvidia-smi") and not path.name.endswith(".exit")
    )


@pytest.mark.parametrize("case", CASES)
def test_golden_case(case: str) -> None:
    expected = json.loads((GOLDEN / case / "expected.json").read_text())
    parsed = {path.name: parse_capture(path) for path in captures(case)}
    assert parsed == expected["files"]
    assert case_probe_data(case) == expected.get("probe_data")


@pytest.mark.parametrize("case", CASES)
def test_every_golden_case_names_its_source(case: str) -> None:
    assert (GOLDEN / case / "SOURCE.md").is_file()


def test_query_reads_units_and_missing_values() -> None:
    text = (
        "index, name, memory.total [MiB], pcie.link.gen.max, compute_cap, mig.mode.current\n"
        "0, NVIDIA A100-SXM4-80GB, 81920 MiB, [N/A], 8.0, [Not Supported]\n"
    )
    (row,) = gpu.parse_query_gpu(text)
    assert row["memory_mib"] == 81920
    assert row["pcie_gen_max"] is None
    assert row["mig_mode"] is None
    assert row["compute_capability"] == "8.0"
    assert row["uuid"] is None  # not asked, so null rather than missing


def test_query_without_header_units() -> None:
    text = "index, memory.total, persistence_mode\n3, 97887, Disabled\n"
    assert gpu.parse_query_gpu(text)[0]["memory_mib"] == 97887


def test_topology_of_one_gpu_is_single() -> None:
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n"
    topology = gpu.parse_topology(text)
    assert topology["devices"] == ["GPU0"]
    assert topology["cpu_affinity"] == {"GPU0": "0-15"}
    assert gpu.classify_interconnect(topology["matrix"], topology["devices"]) == "single"


def test_topology_pasted_after_the_command_line() -> None:
    # As pasted in aikitoria/open-gpu-kernel-modules#12: the prompt line holds the header.
    text = (
        "nvidia-smi topo -m                   GPU0    GPU1    CPU Affinity    NUMA Affinity   "
        "GPU NUMA ID\n"
        "GPU0     X      PHB     0-23    0               N/A\n"
        "GPU1    PHB      X      0-23    0               N/A\n"
    )
    topology = gpu.parse_topology(text)
    assert topology["devices"] == ["GPU0", "GPU1"]
    assert topology["matrix"] == [["X", "PHB"], ["PHB", "X"]]
    assert topology["numa_affinity"] == {"GPU0": "0", "GPU1": "0"}


def test_interconnect_mixed_and_none() -> None:
    devices = ["GPU0", "GPU1", "GPU2", "NIC0"]
    matrix = [["X", "NV4", "SYS", "PIX"], ["NV4", "X", "SYS", "PIX"], ["SYS", "SYS", "X", "NODE"]]
    assert gpu.classify_interconnect(matrix, devices) == "mixed"
    assert gpu.classify_interconnect([], []) == "none"


def test_versions_cuda_not_found_is_null() -> None:
    # `nvidia-smi -q` on a vGPU host (bigstack-oss/cubecos#312) reports no CUDA version.
    text = "Driver Version                            : 580.105.06\nCUDA Version      : Not Found\n"
    assert gpu.parse_versions(text) == {"driver_version": "580.105.06", "cuda_driver_version": None}


# ---------------------------------------------------------------- the probe as a process


def run_probe(path_dirs: list[Path], case: str | None = None) -> dict:
    env = {"PATH": os.pathsep.join(str(d) for d in path_dirs), "LC_ALL": "C"}
    if case is not None:
        env["FLEET_FAKE_GPU_DIR"] = str(GOLDEN / case)
    completed = subprocess.run(
        [REMOTE_PYTHON, str(PROBE)], env=env, capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def fake_path() -> list[Path]:
    # The fake's `#!/usr/bin/env python3` needs a python3 on PATH: the one running the tests.
    return [FAKE_BIN, Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")]


def test_probe_through_fake_h200_nvlink() -> None:
    result = run_probe(fake_path(), "h200x2_nvlink")
    data = result["data"]
    assert result["ok"] is True
    assert result["error"] is None
    assert data["interconnect"] == "nvlink"
    assert data["driver_version"] == "580.159.04"
    assert data["cuda_driver_version"] == "13.0"
    assert [g["compute_capability"] for g in data["gpus"]] == ["9.0", "9.0"]
    assert data["topology"]["matrix"] == [["X", "NV18"], ["NV18", "X"]]
    assert data["p2p_read"] == {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}
    assert data["command_errors"] == {}


def test_probe_through_fake_rtx_pro_6000_pcie() -> None:
    data = run_probe(fake_path(), "rtxpro6000x8_pcie")["data"]
    assert data["interconnect"] == "pcie"
    assert data["gpu_count"] == 8
    assert {g["compute_capability"] for g in data["gpus"]} == {"12.0"}
    assert {g["name"] for g in data["gpus"]} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert data["topology"]["matrix"][0] == ["X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    assert data["command_errors"] == {}


def test_probe_reports_a_failing_nvidia_smi() -> None:
    result = run_probe(fake_path(), "driver_not_loaded")
    assert result["ok"] is False
    assert "couldn't communicate with the NVIDIA driver" in result["error"]
    assert "exit code 9" in result["error"]


def test_probe_keeps_going_when_a_command_is_missing() -> None:
    # The case has no `topo -m` capture: the fake exits 2, as nvidia-smi does on bad arguments.
    result = run_probe(fake_path(), "query_only")
    assert result["ok"] is True
    assert result["data"]["topology"] is None
    assert "nvidia-smi topo -m" in result["data"]["command_errors"]
    assert result["data"]["interconnect"] is None


def test_probe_without_nvidia_smi(tmp_path: Path) -> None:
    result = run_probe([tmp_path])
    assert result == {"ok": False, "data": {}, "error": "nvidia-smi not found"}


def test_fake_refuses_unknown_arguments() -> None:
    env = {**os.environ, "FLEET_FAKE_GPU_DIR": str(GOLDEN / "h200x2_nvlink")}
    completed = subprocess.run(
        [sys.executable, str(FAKE_BIN / "nvidia-smi"), "--bogus"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert completed.returncode == 2
    assert "no capture" in completed.stderr
