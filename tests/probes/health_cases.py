"""The health probe's golden cases (tests/probes/golden/health/<case>/) read as the probe would
read them on a host: shared by the probe's golden tests and the rule tests on run documents."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.probes.handrun import load_helper, load_probe
from tests.recorded import REAL_RUN as RECORDED_H200X2

Host = dict[str, Any]
GOLDEN = Path(__file__).parent / "golden" / "health"
health = load_probe("health")
# The helpers the probe ships, where its pure parsers live (the same modules the probe imports).
kernel_logs = load_helper("_kernel_log")
nvidia_smi = load_helper("_nvidia_smi")
nvlink = load_helper("_nvlink")
pcie = load_helper("_pcie")
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "SOURCE.md").is_file())
KERNEL_LOGS = (
    ("dmesg.txt", "dmesg"),
    ("journalctl_-k.txt", "journalctl -k"),
    ("kern.log", "/var/log/kern.log"),
)


def text(case: str, name: str) -> str | None:
    path = GOLDEN / case / name
    return path.read_text() if path.is_file() else None


def kernel_log(case: str) -> tuple[str | None, str | None, dict[str, str]]:
    for name, source in KERNEL_LOGS:
        found = text(case, name)
        if found is not None:
            if name == "kern.log":
                found = kernel_logs.since_last_boot(found)
            return source, found, {}
    return None, None, {}


def host_facts(case: str) -> dict[str, Any]:
    """What collect() reads from /proc and /sys, from the case's captures of them."""
    facts: dict[str, Any] = {"cmdline": text(case, "proc_cmdline.txt")}
    groups = text(case, "iommu_groups_count.txt")
    if groups is not None:
        facts["iommu_groups"] = int(groups.strip())
    paths = text(case, "sysfs_gpu_paths.txt")
    if paths is not None:
        facts["gpu_bridges"] = {
            pcie.short_bus(line.rsplit("/", 1)[-1]): pcie.bridges_above(line)
            for line in paths.split()
        }
    lspci = text(case, "lspci_-vvv.txt")
    if lspci is not None:
        facts["acs"] = pcie.parse_lspci_acs(lspci)
    devices = text(case, "sysfs_pci_devices.txt")
    if devices is not None:
        facts["pci_scan"] = pci_scan(devices)
    return facts


def pci_scan(listing: str) -> dict[str, list[str]]:
    """_health_sample.scan_pci's answer from a capture's `sysfs_pci_devices.txt` lines
    (`/sys/bus/pci/devices/BDF VENDOR CLASS PATH SIZE`)."""
    found: dict[str, list[str]] = {"gpus": [], "nvswitches": [], "aer_devices": []}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) < 3 or not fields[0].startswith("/sys/bus/pci/devices/"):
            continue
        bus_id, vendor, klass = fields[0].rsplit("/", 1)[1], fields[1], fields[2]
        if vendor == "0x10de" and klass.startswith(("0x0300", "0x0302")):
            found["gpus"].append(bus_id)
            found["aer_devices"].append(bus_id)
        elif vendor == "0x10de" and klass.startswith("0x0680"):
            found["nvswitches"].append(bus_id)
            found["aer_devices"].append(bus_id)
    return found


def case_data(case: str) -> dict[str, Any]:
    """build_data over a case's captures, as collect() would call it."""
    error = text(case, "nvidia-smi_-q_-x.error.txt")
    return health.build_data(  # type: ignore[no-any-return]
        text(case, "nvidia-smi_-q_-x.xml"),
        text(case, "nvidia-smi_nvlink_-s.txt"),
        text(case, "nvidia-smi_nvlink_-e.txt"),
        text(case, "proc_driver_nvidia_version.txt"),
        kernel_log(case),
        host_facts(case),
        query_text=text(case, "nvidia-smi_query-gpu_health.csv"),
        smi_error=error.strip() if error else None,
    )


def parsed_files(case: str) -> dict[str, Any]:
    """Each small capture read by the parser for the command it is named after."""
    parsers = {
        "nvidia-smi_nvlink_-s.txt": nvlink.parse_nvlink_status,
        "nvidia-smi_nvlink_-e.txt": nvlink.parse_nvlink_errors,
        "nvidia-smi_query-gpu_health.csv": nvidia_smi.parse_query_health,
        "dmesg.txt": kernel_logs.parse_kernel_log,
        "kern.log": lambda t: kernel_logs.parse_kernel_log(kernel_logs.since_last_boot(t)),
        "proc_driver_nvidia_version.txt": health.parse_module_version,
        "proc_cmdline.txt": pcie.parse_cmdline,
        "lspci_-vvv.txt": pcie.parse_lspci_acs,
    }
    return {
        name: parse(text(case, name))
        for name, parse in sorted(parsers.items())
        if text(case, name) is not None
    }


def expected(case: str) -> dict[str, Any]:
    return dict(json.loads((GOLDEN / case / "expected.json").read_text()))


def probe_result(case: str) -> dict[str, Any]:
    """The health probe's result in a run document, as the runner records it."""
    data = case_data(case)
    return {
        "status": "ok",
        "ok": True,
        "data": data,
        "error": None,
        "elapsed_s": 0.2,
        "output_tail": "",
    }


def real_host(health_data: dict[str, Any]) -> Host:
    host = copy.deepcopy(json.loads(RECORDED_H200X2.read_text())["hosts"]["local"])
    host["probes"]["health"] = {
        "status": "ok",
        "ok": True,
        "data": health_data,
        "error": None,
        "elapsed_s": 0.2,
        "output_tail": "",
    }
    return host  # type: ignore[no-any-return]


def real_run_with_health(case: str = "h200x1_device") -> dict[str, Any]:
    """The recorded H200 run document (it predates the health probe) with a health result built
    from a golden health case: a run that the whole inference pack judges."""
    document: dict[str, Any] = json.loads(RECORDED_H200X2.read_text())
    document["hosts"]["local"] = real_host(case_data(case))
    document["probes"] = sorted({*document["probes"], "health"})
    return document
