"""The health probe: golden files from real and public nvidia-smi / kernel-log / lspci captures
(tests/probes/golden/health/<case>/, each with a SOURCE.md), its pure parsers, and the probe run as
a process through the fake nvidia-smi."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REMOTE_PYTHON
from tests.probes.handrun import BY_HAND
from tests.probes.health_cases import (
    CASES,
    GOLDEN,
    case_data,
    expected,
    health,
    kernel_logs,
    nvidia_smi,
    nvlink,
    parsed_files,
    pcie,
)

REPO = Path(__file__).resolve().parents[2]
FAKE_BIN = REPO / "tests" / "fakes" / "bin"
PROBE = REPO / "probes" / "health.py"


@pytest.mark.parametrize("case", CASES)
def test_golden_case(case: str) -> None:
    want = expected(case)
    assert parsed_files(case) == want["files"]
    assert case_data(case) == want["probe_data"]


def test_every_case_has_its_expectations() -> None:
    folders = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir() and p.name != "samples")
    assert folders == CASES
    assert all((GOLDEN / case / "expected.json").is_file() for case in CASES)


# ------------------------------------------------------------------ what the cases must show


def gpus(case: str) -> list[dict]:
    return case_data(case)["gpus"]  # type: ignore[no-any-return]


def test_healthy_h200_pair() -> None:
    data = case_data("h200x2")
    assert data["driver"] == {
        "nvidia_smi": "580.159.04",
        "kernel_module": "580.159.04",
        "versions_match": True,
    }
    assert data["kernel_module"]["flavour"] == "open"
    for gpu in data["gpus"]:
        assert gpu["ecc"]["mode"] == "Enabled"
        assert gpu["ecc"]["volatile"] == {"corrected": 0, "uncorrected": 0}
        assert gpu["remapped_rows"] == {
            "correctable": 0,
            "uncorrectable": 0,
            "pending": False,
            "failure": False,
        }
        assert gpu["retired_pages"] is None  # N/A on Hopper
        assert gpu["clock_events"]["active"] == ["gpu_idle"]
        assert gpu["clock_events"]["hw_slowdown"] is False
        assert gpu["fabric"]["state"] == "Completed"
        assert gpu["fabric"]["status"] == "Success"
        assert gpu["pcie"] == {"gen": 5, "gen_max": 5, "width": 16, "width_max": 16, "replays": 0}
        assert gpu["nvlink"]["links"] == gpu["nvlink"]["active"] == 18
        assert gpu["nvlink"]["error_total"] is None  # no `nvlink -e` capture: not readable
        assert gpu["gsp_firmware"] == "580.159.04"
    # Hopper reports T.Limit headroom: 52 C below the limit, slowdown 2 C past it.
    assert data["gpus"][0]["temperature"]["slowdown_margin_c"] == 54
    assert data["gpus"][0]["temperature"]["shutdown_margin_c"] == 60


def test_single_h200_from_the_lent_machine() -> None:
    data = case_data("h200x1_device")
    (gpu,) = data["gpus"]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["nvlink"] is None  # `nvlink -s` printed nothing: no links in use
    assert gpu["fabric"]["state"] is None  # N/A on this VM
    assert data["iommu"]["groups"] == 0
    assert data["iommu"]["mode"] == "off"
    assert data["kernel_log"]["readable"] is True
    assert data["kernel_log"]["xids"] == []
    timings = json.loads((GOLDEN / "h200x1_device" / "timings.json").read_text())
    assert max(timings[f"par{i}"] for i in range(3)) < 1.0  # the probe's commands, all at once


def test_query_csv_of_the_lent_machine_agrees_with_its_xml() -> None:
    xml = gpus("h200x1_device")[0]
    (csv,) = parsed_files("h200x1_device")["nvidia-smi_query-gpu_health.csv"]
    assert csv["uuid"] == xml["uuid"]
    assert csv["pci_bus_id"] == xml["pci_bus_id"]
    assert csv["ecc"]["volatile"] == xml["ecc"]["volatile"]
    assert csv["clock_events"]["active"] == xml["clock_events"]["active"]
    assert csv["pcie"]["width_max"] == xml["pcie"]["width_max"]


def test_remap_pending_names_the_gpu() -> None:
    gpu0, gpu1 = gpus("remap_pending_gpud80")
    assert gpu0["remapped_rows"]["pending"] is False
    assert gpu1["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 4,
        "pending": True,
        "failure": False,
    }
    assert gpu1["gpu"] == "GPU1 (00000000:00:07.0)"


def test_xid63_and_correctable_remap() -> None:
    data = case_data("xid63_remap_pending_stas00")
    gpu0 = data["gpus"][0]
    assert gpu0["remapped_rows"]["pending"] is True
    assert gpu0["ecc"]["volatile"]["corrected"] == 177
    assert gpu0["ecc"]["aggregate"]["corrected"] == 177
    (event,) = data["kernel_log"]["xids"]
    assert event["xid"] == 63
    assert event["pci"] == "0000:10:1c"
    assert event["gpu"] is None  # no GPU at that bus in this XML
    assert "row remapping" in event["meaning"]


def test_hw_slowdown_from_xml_and_from_the_mask() -> None:
    gpu0, gpu1 = gpus("hw_slowdown_power_brake_l4rz")
    assert gpu0["clock_events"]["active"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert gpu0["clock_events"]["mask"] == "0x0000000000000088"
    assert gpu0["clock_events"]["hw_slowdown"] is True
    assert gpu0["clocks"] == {"sm_mhz": 382, "sm_max_mhz": 1980}
    assert gpu1["clock_events"]["hw_slowdown"] is False
    csv0 = parsed_files("hw_slowdown_power_brake_l4rz")["nvidia-smi_query-gpu_health.csv"][0]
    assert csv0["clock_events"]["active"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert csv0["clock_events"]["hw_slowdown"] is True


def test_fabric_status_other_than_success() -> None:
    gpu0, gpu1 = gpus("fabric_insufficient_resources_azhpc506")
    assert gpu0["fabric"]["state"] == "Completed"
    assert gpu0["fabric"]["status"] == "Insufficient Resources"
    assert gpu1["fabric"]["status"] == "Success"


def test_nvlink_down_and_with_errors() -> None:
    down = gpus("nvlink_inactive_azhpc73")[1]["nvlink"]
    assert down["down"] == [3, 5]
    assert (down["links"], down["active"]) == (18, 16)
    counted = gpus("nvlink_errors_layout_stas00")
    assert counted[0]["nvlink"]["error_total"] == 0
    assert counted[1]["nvlink"]["error_totals"] == {
        "crc_errors": 3,
        "recovery_errors": 0,
        "replay_errors": 12,
    }
    assert counted[1]["nvlink"]["links_with_errors"] == [
        "link 2 crc_errors=3",
        "link 2 replay_errors=12",
    ]


def test_older_schema_m10_at_gen1_x8() -> None:
    four = gpus("m10x4_gen1_x8_itnovum")
    assert len(four) == 4
    for gpu in four:
        assert gpu["pcie"]["gen"] == 1
        assert gpu["pcie"]["width"] == 8
        assert gpu["pcie"]["width_max"] == 16
        assert gpu["ecc"]["mode"] is None  # N/A: no ECC on the M10
        assert gpu["remapped_rows"] is None
        assert gpu["clock_events"]["hw_slowdown"] is False  # the two causes read N/A there
    assert four[0]["temperature"]["slowdown_c"] == 91
    assert four[0]["temperature"]["slowdown_margin_c"] == 91 - 37
    assert four[0]["power"] == {"draw_w": 10.43, "limit_w": 53.0}


def test_older_schema_p100_retired_pages() -> None:
    (gpu,) = gpus("p100_retired_pages_pending")
    assert gpu["retired_pages"] == {"single_bit": 2, "double_bit": 0, "pending": True}
    assert gpu["ecc"]["volatile"] == {"corrected": 0, "uncorrected": 0}  # single/double-bit totals
    assert gpu["remapped_rows"] is None


def test_xid79_when_nvidia_smi_fails() -> None:
    data = case_data("xid79_fallen_off_bus_akash209")
    assert data["gpus"] == []
    assert "Unable to determine the device handle" in data["nvidia_smi_error"]
    (event,) = data["kernel_log"]["xids"]
    assert event["xid"] == 79
    assert event["time"] == "Fri Apr  5 21:29:39 2024"
    assert event["meaning"] == "GPU has fallen off the bus"
    assert data["kernel_log"]["fell_off_bus"] == ["0000:a1:00.0"]
    assert data["kernel_module"] == {
        "flavour": "proprietary",
        "version": "535.161.07",
        "banner": "NVRM version: NVIDIA UNIX x86_64 Kernel Module 535.161.07 Sat Feb 17 22:55:48 UTC 2024",
    }


def test_fallen_off_the_bus_over_three_lines() -> None:
    data = case_data("fell_off_bus_no_xid_nvsentinel155")
    assert data["kernel_log"]["xids"] == []
    assert data["kernel_log"]["fell_off_bus"] == ["0000:b3:00.0"]


def test_xid48_64_from_kern_log() -> None:
    log = case_data("xid48_64_kernlog_gpuoperator1146")["kernel_log"]
    assert log["source"] == "/var/log/kern.log"
    assert [(e["xid"], e["pci"], e["time"], e["uptime_s"]) for e in log["xids"]] == [
        (48, "0000:07:00", "Dec  2 11:38:47", 219.470994),
        (64, "0000:07:00", "Dec  2 11:38:47", 219.47105),
    ]
    assert log["xid_counts"] == {"48": 1, "64": 1}


def test_xid_43_31_94() -> None:
    log = case_data("xid43_31_94_akash244")["kernel_log"]
    assert [e["xid"] for e in log["xids"]] == [43, 43, 31, 94]
    assert log["xids"][-1]["meaning"] == "contained ECC error"
    assert log["xids"][-1]["text"].startswith("pid='<unknown>', name=<unknown>, Contained: SM")


def test_acs_on_the_bridges_above_pcie_gpus() -> None:
    acs = case_data("acs_enabled_nccl523_2079")["acs"]
    assert acs["readable"] is True
    assert acs["enabled"] == ["0000:40:01.1", "0000:60:01.1"]
    assert acs["bridges"][0]["gpus"] == ["GPU0 (00000000:41:00.0)"]


# ------------------------------------------------------------------ parsers on inline text


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        ("0x0000000000000000", []),
        ("0x0000000000000001", ["gpu_idle"]),
        ("0x0000000000000004", ["sw_power_cap"]),
        ("0x0000000000000008", ["hw_slowdown"]),
        ("0x0000000000000020", ["sw_thermal_slowdown"]),
        ("0x0000000000000048", ["hw_slowdown", "hw_thermal_slowdown"]),
        ("0x0000000000000100", ["display_clock_setting"]),
        ("0x0000000000000212", ["applications_clocks_setting", "sync_boost", "unknown_0x200"]),
        ("[N/A]", None),
        (None, None),
    ],
)
def test_clock_event_mask(mask: str | None, names: list[str] | None) -> None:
    assert nvidia_smi.decode_clock_event_reasons(mask) == names
    if names is not None and not any(n.startswith("unknown") for n in names):
        assert nvidia_smi.encode_clock_event_reasons(names) == mask


def test_nvlink_errors_with_indented_counters() -> None:
    # The per-link block layout (counter lines under `Link N:`) reads the same.
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n"
        "\t Link 0:\n\t\t Replay Errors: 0\n\t\t CRC Errors: 7\n"
        "\t\t Link recovery successful events: 2\n\t\t Effective BER: 1.2e-15\n"
        "\t Link 1:\n\t\t Replay Errors: 0\n\t\t Link recovery failed events: 1\n"
    )
    parsed = nvlink.parse_nvlink_errors(text)
    assert parsed["0"]["links"]["0"] == {
        "replay_errors": 0,
        "crc_errors": 7,
        "link_recovery_successful_events": 2,
        "effective_ber": "1.2e-15",
    }
    gpu = {"index": 0, "uuid": "GPU-a"}
    status = nvlink.parse_nvlink_status(
        "GPU 0: x (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
    )
    summary = nvlink.nvlink_for_gpu(gpu, status, parsed)
    assert summary["down"] == [1]
    assert summary["error_totals"] == {
        "crc_errors": 7,
        "replay_errors": 0,
        "link_recovery_failed_events": 1,
    }
    assert summary["error_total"] == 8


def test_gpu_without_links_has_no_nvlink() -> None:
    status = nvlink.parse_nvlink_status("GPU 0: NVIDIA RTX PRO 6000 (UUID: GPU-b)\n")
    assert nvlink.nvlink_for_gpu({"index": 0, "uuid": "GPU-b"}, status, None) is None


def test_lspci_as_a_user_is_not_readable() -> None:
    text = "00:01.1 PCI bridge: Intel Corporation Device 1234\n\tCapabilities: <access denied>\n"
    readings = pcie.parse_lspci_acs(text)
    assert readings == {"0000:00:01.1": {"acs_ctl": None, "readable": False}}
    acs = pcie.acs_summary({"0000:00:01.1": ["GPU0 (00000000:01:00.0)"]}, readings)
    assert acs["readable"] is False
    assert acs["why"] == "not readable: needs root (0000:00:01.1)"
    assert acs["bridges"][0]["enabled"] is None


def test_acs_from_config_space() -> None:
    config = bytearray(4096)
    # extended capabilities: AER (0x0001) at 0x100 -> ACS (0x000d) at 0x140, control 0x001d
    config[0x100:0x104] = (0x0001 | (1 << 16) | (0x140 << 20)).to_bytes(4, "little")
    config[0x140:0x144] = (0x000D | (1 << 16)).to_bytes(4, "little")
    config[0x146:0x148] = (0x001D).to_bytes(2, "little")
    assert pcie.parse_acs_config(bytes(config)) == {
        "readable": True,
        "acs_ctl": "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-",
    }
    assert pcie.parse_acs_config(bytes(config[:64])) == {"readable": False, "acs_ctl": None}
    assert pcie.parse_acs_config(bytes(4096)) == {"readable": True, "acs_ctl": None}


def test_bridges_above_a_gpu() -> None:
    path = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"
    assert pcie.bridges_above(path) == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0"]
    assert pcie.bridges_above("/sys/devices/pci0000:00/0000:00:06.0") == []


@pytest.mark.parametrize(
    ("cmdline", "groups", "types", "mode"),
    [
        ("root=/dev/sda1", 0, [], "off"),
        ("intel_iommu=on iommu=pt", 40, [], "passthrough"),
        ("amd_iommu=on iommu.passthrough=1", 40, [], "passthrough"),
        ("intel_iommu=on", 40, [], None),
        ("intel_iommu=on", 40, ["DMA-FQ", "DMA-FQ"], "translation"),
        ("intel_iommu=on iommu=pt", 40, ["identity"], "passthrough"),
        ("intel_iommu=off", 12, [], "off"),
        ("", None, [], None),
    ],
)
def test_iommu_mode(cmdline: str, groups: int | None, types: list[str], mode: str | None) -> None:
    assert pcie.iommu_mode(pcie.parse_cmdline(cmdline), groups, types) == mode


def test_driver_version_mismatch_from_nvidia_smi_error() -> None:
    error = (
        "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95"
    )
    module = health.parse_module_version(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build\n"
    )
    assert health.driver_versions(None, module, error) == {
        "nvidia_smi": "580.95",
        "kernel_module": "570.158.01",
        "versions_match": False,
    }


def test_journal_and_kern_log_since_boot() -> None:
    text = (
        "Dec  1 10:00:00 h kernel: NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.\n"
        "Dec  2 08:00:00 h kernel: Linux version 6.8.0 (build@host)\n"
        "Dec  2 08:05:00 h kernel: NVRM: Xid (PCI:0000:07:00): 13, Graphics Exception\n"
    )
    log = kernel_logs.parse_kernel_log(kernel_logs.since_last_boot(text))
    assert [(e["xid"], e["time"]) for e in log["xids"]] == [(13, "Dec  2 08:05:00")]


def test_sxid_and_mig_xid_lines() -> None:
    text = (
        "[ 12.5] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error\n"
        "[ 13.1] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No\n"
    )
    log = kernel_logs.parse_kernel_log(
        text, [{"pci_bus_id": "00000000:01:00.0", "gpu": "GPU0 (00000000:01:00.0)"}]
    )
    assert log["sxids"][0]["sxid"] == 12028
    assert log["sxids"][0]["pci"] == "0000:86:00.0"
    assert log["xids"][0]["xid"] == 94
    assert log["xids"][0]["gpu"] == "GPU0 (00000000:01:00.0)"
    assert log["xids"][0]["uptime_s"] == 13.1


def test_unreadable_kernel_log_is_said_as_a_fact() -> None:
    tried = {"dmesg": "dmesg: read kernel buffer failed: Operation not permitted (exit code 1)"}
    log = kernel_logs.kernel_log_result(None, None, tried, [])
    assert log["readable"] is False
    assert log["why"] == "not readable: needs root or CAP_SYSLOG"
    assert log["xids"] is None


# ------------------------------------------------------------------ the probe as a process


def run_probe(path_dirs: list[Path], case: str | None = None) -> dict:
    env = {"PATH": os.pathsep.join(str(d) for d in path_dirs), "LC_ALL": "C"}
    if case is not None:
        env["FLEET_FAKE_GPU_DIR"] = str(GOLDEN / case)
    completed = subprocess.run(
        [REMOTE_PYTHON, str(BY_HAND), "health"], env=env, capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    return dict(json.loads(completed.stdout))


def fake_path() -> list[Path]:
    return [FAKE_BIN, Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")]


@pytest.mark.parametrize("case", ["h200x1_device", "nvlink_errors_layout_stas00"])
def test_probe_through_fake_nvidia_smi(case: str) -> None:
    result = run_probe(fake_path(), case)
    assert result["ok"] is True
    assert result["error"] is None
    data = result["data"]
    want = case_data(case)
    assert data["gpus"] == want["gpus"]  # the same facts as build_data on the captures
    assert data["driver_version"] == "580.159.04"
    assert data["command_errors"] == {}
    # Host facts come from this machine: present, whatever they say.
    assert set(data["kernel_log"]) >= {"readable", "source", "why", "xids"}
    assert data["kernel_log"]["readable"] or data["kernel_log"]["why"]
    assert data["iommu"]["mode"] in (None, "off", "passthrough", "translation")
    assert data["timings_s"]["total"] < 10


def test_probe_without_nvidia_smi(tmp_path: Path) -> None:
    result = run_probe([tmp_path, Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")])
    if result["error"] != "nvidia-smi not found":  # this machine has one: not the case tested
        pytest.skip("nvidia-smi on PATH here")
    assert result["ok"] is False
    assert result["data"]["gpus"] == []
    assert "kernel_log" in result["data"]  # host facts are still reported


def test_probe_with_a_failing_nvidia_smi(tmp_path: Path) -> None:
    (tmp_path / "nvidia-smi").write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate with the NVIDIA driver.'\nexit 9\n"
    )
    (tmp_path / "nvidia-smi").chmod(0o755)
    result = run_probe([tmp_path, Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")])
    assert "couldn't communicate with the NVIDIA driver" in result["data"]["nvidia_smi_error"]
    assert result["data"]["gpus"] == []
    if result["data"]["gpus_on_pci_bus"]:  # NVIDIA GPUs on this machine's bus: a health fact
        assert result["ok"] is True
    else:  # no GPU here at all: nothing to be healthy
        assert result["ok"] is False
        assert result["error"].startswith("nvidia-smi fails and no NVIDIA GPU is on the PCI bus")


def test_probe_with_no_gpu(tmp_path: Path) -> None:
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    result = run_probe([tmp_path, Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")])
    assert result["ok"] is False
    assert result["error"].startswith("no GPU: No devices were found")


def test_probe_falls_back_to_the_query_when_the_xml_is_cut_short(tmp_path: Path) -> None:
    csv = GOLDEN / "h200x1_device" / "nvidia-smi_query-gpu_health.csv"
    (tmp_path / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  -q) printf '<?xml version=\"1.0\" ?>\\n<nvidia_smi_log>\\n<gpu id=' ;;\n"
        f"  --query-gpu=*) cat {csv} ;;\n"
        "esac\n"
    )
    (tmp_path / "nvidia-smi").chmod(0o755)
    result = run_probe([tmp_path, Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")])
    assert result["ok"] is True
    (gpu,) = result["data"]["gpus"]
    assert gpu["uuid"] == "GPU-c66c6966-7909-78ce-12c5-5d1ac469cc1f"
    assert gpu["clock_events"]["active"] == ["gpu_idle"]
    assert result["data"]["command_errors"]["nvidia-smi -q -x"].startswith("not XML")
