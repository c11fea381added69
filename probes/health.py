"""GPU and link health: ECC, row remapping, clock-event reasons, thermals, PCIe, NVLink, fabric, XIDs, IOMMU/ACS."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

TIMEOUT_S = 30
# How the controller compares this probe's fields across hosts (fleet/analysis/facts.py).
# Counts (ECC, remapped rows, XIDs), link state, modes and limits are facts: a host that differs
# from its twins there is the news. Readings that move with load are volatile: temperatures, power
# draw, the current SM clock and PCIe generation (both drop at idle), which clock-event reasons
# are active right now (idle comes and goes), the throttle counters, and the log lines' times.
FACTS = {
    "identity": [
        "gpus[*].uuid",
        "gpus[*].pci_bus_id",
        "gpus[*].gpu",
        "gpus[*].serial",
        "kernel_log.xids[*].gpu",
        "kernel_log.xids[*].pci",
        "kernel_log.sxids[*].pci",
        "acs.bridges[*].bridge",
        "acs.bridges[*].gpus",
        "iommu.gpu_groups.*",
    ],
    "volatile": [
        "gpus[*].temperature.gpu_c",
        "gpus[*].temperature.memory_c",
        "gpus[*].temperature.tlimit_c",
        "gpus[*].temperature.slowdown_margin_c",
        "gpus[*].temperature.shutdown_margin_c",
        "gpus[*].power.draw_w",
        "gpus[*].clocks.sm_mhz",
        "gpus[*].pcie.gen",
        "gpus[*].performance_state",
        "gpus[*].clock_events.active",
        "gpus[*].clock_events.mask",
        "gpus[*].clock_events.counters_us.*",
        "kernel_log.xids[*].time",
        "kernel_log.xids[*].uptime_s",
        "kernel_log.xids[*].text",
        "kernel_log.sxids[*].time",
        "kernel_log.sxids[*].uptime_s",
        "kernel_log.sxids[*].text",
        "kernel_log.tried",
        "command_errors",
        "timings_s",
        "timings_s.*",
    ],
}

COMMAND_TIMEOUT_S = 10.0
LOG_TIMEOUT_S = 5.0
NOT_READABLE_LOG = "not readable: needs root or CAP_SYSLOG"
XML_ARGS = ("-q", "-x")
NVLINK_STATUS_ARGS = ("nvlink", "-s")
NVLINK_ERRORS_ARGS = ("nvlink", "-e")
# Only where `-q -x` does not parse: the same per-GPU facts from one --query-gpu call.
QUERY_FIELDS = (
    "index",
    "uuid",
    "pci.bus_id",
    "clocks_event_reasons.active",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "ecc.errors.corrected.aggregate.total",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "retired_pages.pending",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.current.sm",
    "clocks.max.sm",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "compute_mode",
)
QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv")
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_CMDLINE = "/proc/cmdline"
KERN_LOG = "/var/log/kern.log"
SYS_PCI = "/sys/bus/pci/devices"
SYS_IOMMU_GROUPS = "/sys/kernel/iommu_groups"
SYS_MODULES = "/sys/module"

# nvmlClocksEventReason* (nvml.h; the same bits as the deprecated nvmlClocksThrottleReason*).
CLOCK_EVENT_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
CLOCK_EVENT_NAMES = tuple(name for _, name in CLOCK_EVENT_BITS)
# Reasons that mean the hardware pulled the clocks down: HW Slowdown and its two causes.
HW_SLOWDOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
# XML element suffixes that differ from the NVML names.
XML_REASON_ALIASES = {"display_clocks_setting": "display_clock_setting"}

# A short meaning for the common XIDs (NVIDIA's Xid catalog, docs.nvidia.com/deploy/xid-errors).
XID_MEANINGS = {
    8: "GPU stopped processing (channel idle timeout)",
    13: "graphics engine exception (usually the application)",
    31: "GPU memory page fault (usually the application)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (channel reset; usually the application)",
    44: "graphics engine fault during context switch",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit (uncorrectable) ECC error",
    56: "display engine error",
    57: "error programming video memory interface",
    58: "unstable video memory interface",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded (reset to activate)",
    64: "ECC page retirement or row remapping recording failure",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link error",
    140: "unrecovered ECC error",
    143: "GPU initialization failure",
    144: "NVLink SAW error",
    145: "NVLink RLW error",
    146: "NVLink TLW error",
    147: "NVLink TREX error",
    148: "NVLink NVLPW control error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    154: "GPU recovery action changed",
}

MISSING_VALUE = re.compile(
    r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions|Unknown|"
    r"Requested functionality has been deprecated)\]?$",
    re.IGNORECASE,
)
NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?")
BDF = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
NVLINK_GPU = re.compile(r"^GPU (\d+):.*?(?:\(UUID: (GPU-[0-9a-fA-F-]+)\))?\s*$")
NVLINK_LINK = re.compile(r"^\s*Link (\d+):\s*(.*?)\s*$")
NVLINK_COUNTER = re.compile(r"^\s*([A-Za-z][^:]*?)\s*:\s*(.*?)\s*$")
NVLINK_SPEED = re.compile(r"^([\d.]+)\s*GB/s$")
# Kernel-log lines: `[  219.47] NVRM: Xid (PCI:0000:07:00): 48, pid=..., <text>`, with the MIG
# form `(PCI:0000:01:00 GPU-I:05)`, and the NVSwitch driver's `SXid (PCI:0000:86:00.0): 12028, ...`.
XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F:.]+)[^)]*\): (?P<xid>\d+),\s*(?P<rest>.*)$"
)
SXID_LINE = re.compile(
    r"SXid \((?:PCI:)?(?P<pci>[0-9a-fA-F:.]+)[^)]*\): (?P<xid>\d+),\s*(?P<rest>.*)$"
)
NAMED_GPU_LINE = re.compile(
    r"NVRM: (?:GPU (?:at )?(?:PCI:)?|The NVIDIA GPU )(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)"
)
UPTIME_STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]\s*")
CTIME_STAMP = re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s*")
SYSLOG_STAMP = re.compile(
    r"^((?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)|(?:\d{4}-\d\d-\d\dT[\d:.]+(?:[+-]\d\d:?\d\d|Z)?))\s+\S+\s+kernel:\s*"
)
KERNEL_BOOT_LINE = re.compile(r"kernel: (?:\[\s*0\.000000\] )?(?:Linux version |Command line: )")
MODULE_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")
NVML_LIB_VERSION = re.compile(r"NVML library version:\s*(\d+(?:\.\d+)+)")
ACS_FLAGS = (
    "SrcValid",
    "TransBlk",
    "ReqRedir",
    "CmpltRedir",
    "UpstreamFwd",
    "EgressCtrl",
    "DirectTrans",
)
ACSCTL_LINE = re.compile(r"ACSCtl:\s*(.*)$")
LSPCI_DEVICE = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s")
ACS_EXT_CAP_ID = 0x000D
PCI_EXT_CAP_START = 0x100
EXCERPT = 200


# ---------------------------------------------------------------- small readers


def _text(node: Optional[ET.Element], path: str) -> Optional[str]:
    """The stripped text at `path` under `node`, or None when absent or an N/A-like value."""
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if not value or MISSING_VALUE.match(value) else value


def _number(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    match = NUMBER.match(value.strip())
    return float(match.group(0)) if match else None


def _int(value: Optional[str]) -> Optional[int]:
    number = _number(value)
    return None if number is None else int(number)


def _yes(value: Optional[str]) -> Optional[bool]:
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in ("yes", "true", "enabled", "active"):
        return True
    if lowered in ("no", "false", "disabled", "not active"):
        return False
    return None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _sum(values: Sequence[Optional[int]]) -> Optional[int]:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _short_bus(bus_id: Optional[str]) -> Optional[str]:
    """00000000:A1:00.0, 0000:a1:00.0 and the kernel log's 0000:a1:00 -> 'a1:00' (bus:device)."""
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) < 2:
        return None
    return "%s:%s" % (parts[-2][-2:], parts[-1].split(".")[0])


def _label(index: Any, bus_id: Optional[str]) -> str:
    return "GPU%s (%s)" % (index, bus_id or "bus id not reported")


# ---------------------------------------------------------------- nvidia-smi -q -x


def decode_clock_event_reasons(mask: Optional[str]) -> Optional[List[str]]:
    """`clocks_event_reasons.active` ('0x0000000000000088') -> ['hw_slowdown', 'hw_power_brake_slowdown']."""
    if mask is None:
        return None
    try:
        value = int(mask.strip(), 16)
    except ValueError:
        return None
    names = [name for bit, name in CLOCK_EVENT_BITS if value & bit]
    unknown = value & ~sum(bit for bit, _ in CLOCK_EVENT_BITS)
    if unknown:
        names.append("unknown_0x%x" % unknown)
    return names


def encode_clock_event_reasons(active: Sequence[str]) -> str:
    bits = dict((name, bit) for bit, name in CLOCK_EVENT_BITS)
    return "0x%016x" % sum(bits.get(name, 0) for name in active)


def _clock_events(gpu: ET.Element) -> Dict[str, Any]:
    section = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if section is None:  # drivers before R535 say "throttle"
        section = gpu.find("clocks_throttle_reasons")
        prefix = "clocks_throttle_reason_"
    reasons: Dict[str, Optional[bool]] = {}
    if section is not None:
        for child in section:
            name = child.tag[len(prefix) :] if child.tag.startswith(prefix) else child.tag
            name = XML_REASON_ALIASES.get(name, name)
            reasons[name] = _yes((child.text or "").strip() or None)
    counters_section = _first(
        gpu.find("clocks_event_reasons_counters"), gpu.find("clocks_throttle_reasons_counters")
    )
    counters: Dict[str, Optional[int]] = {}
    if counters_section is not None:
        for child in counters_section:
            name = re.sub(r"^clocks_(?:event|throttle)_reasons_counters_", "", child.tag)
            counters[name] = _int(_text(counters_section, child.tag))
    return _clock_summary(reasons if section is not None else None, counters or None)


def _clock_summary(
    reasons: Optional[Mapping[str, Optional[bool]]], counters: Optional[Dict[str, Optional[int]]]
) -> Dict[str, Any]:
    """Active reasons by name, the NVML mask they make, and whether a HW slowdown is on: True if
    one of HW_SLOWDOWN_REASONS is active, False if HW Slowdown reads not active (its two causes
    may be N/A on older GPUs), None when HW Slowdown itself is not reported."""
    if reasons is None:
        return {"active": None, "mask": None, "hw_slowdown": None, "counters_us": counters}
    active = [name for name, on in reasons.items() if on]
    if any(reasons.get(name) for name in HW_SLOWDOWN_REASONS):
        hw_slowdown: Optional[bool] = True
    else:
        hw_slowdown = False if reasons.get("hw_slowdown") is False else None
    return {
        "active": active,
        "mask": encode_clock_event_reasons(active),
        "hw_slowdown": hw_slowdown,
        "counters_us": counters,
    }


def _ecc_counts(section: Optional[ET.Element]) -> Dict[str, Optional[int]]:
    """Corrected and uncorrected totals of one ECC timescale, in any of nvidia-smi's layouts:
    sram_/dram_(un)correctable[_parity|_secded] (R520+), single_bit/double_bit totals (older)."""
    if section is None:
        return {"corrected": None, "uncorrected": None}
    if section.find("single_bit") is not None or section.find("double_bit") is not None:
        return {
            "corrected": _int(_text(section, "single_bit/total")),
            "uncorrected": _int(_text(section, "double_bit/total")),
        }
    corrected: List[Optional[int]] = []
    uncorrected: List[Optional[int]] = []
    for child in section:
        if child.tag.endswith("_threshold_exceeded"):
            continue
        value = _int(_text(section, child.tag))
        if "uncorrectable" in child.tag:
            uncorrected.append(value)
        elif "correctable" in child.tag:
            corrected.append(value)
    return {"corrected": _sum(corrected), "uncorrected": _sum(uncorrected)}


def _ecc(gpu: ET.Element) -> Dict[str, Any]:
    errors = gpu.find("ecc_errors")
    return {
        "mode": _text(gpu, "ecc_mode/current_ecc"),
        "pending_mode": _text(gpu, "ecc_mode/pending_ecc"),
        "volatile": _ecc_counts(errors.find("volatile") if errors is not None else None),
        "aggregate": _ecc_counts(errors.find("aggregate") if errors is not None else None),
        "sram_threshold_exceeded": _yes(_text(errors, "aggregate/sram_threshold_exceeded")),
        "unrepairable_memory": _yes(_text(errors, "unrepairable_memory")),
    }


def _remapped_rows(gpu: ET.Element) -> Optional[Dict[str, Any]]:
    section = gpu.find("remapped_rows")
    if section is None:
        return None
    rows = {
        "correctable": _int(_text(section, "remapped_row_corr")),
        "uncorrectable": _int(_text(section, "remapped_row_unc")),
        "pending": _yes(_text(section, "remapped_row_pending")),
        "failure": _yes(_text(section, "remapped_row_failure")),
    }
    return rows if any(v is not None for v in rows.values()) else None  # N/A: no row remapper


def _retired_pages(gpu: ET.Element) -> Optional[Dict[str, Any]]:
    section = gpu.find("retired_pages")
    if section is None:
        return None
    pages = {
        "single_bit": _int(_text(section, "multiple_single_bit_retirement/retired_count")),
        "double_bit": _int(_text(section, "double_bit_retirement/retired_count")),
        "pending": _yes(
            _first(_text(section, "pending_retirement"), _text(section, "pending_blacklist"))
        ),
    }
    return pages if any(v is not None for v in pages.values()) else None  # N/A on Hopper


def _temperature(gpu: ET.Element) -> Dict[str, Any]:
    t = gpu.find("temperature")
    temp = _int(_text(t, "gpu_temp"))
    slowdown = _int(_text(t, "gpu_temp_slow_threshold"))
    shutdown = _int(_text(t, "gpu_temp_max_threshold"))
    # Hopper and later drivers report T.Limit: the current headroom below the limit, and the
    # thresholds as headroom values (slowdown at -2 C means 2 C past the limit).
    tlimit = _int(_text(t, "gpu_temp_tlimit"))
    slow_tlimit = _int(_text(t, "gpu_temp_slow_tlimit_threshold"))
    shut_tlimit = _int(_text(t, "gpu_temp_max_tlimit_threshold"))
    return {
        "gpu_c": temp,
        "memory_c": _int(_text(t, "memory_temp")),
        "slowdown_c": slowdown,
        "shutdown_c": shutdown,
        "tlimit_c": tlimit,
        "slowdown_margin_c": _margin(temp, slowdown, tlimit, slow_tlimit),
        "shutdown_margin_c": _margin(temp, shutdown, tlimit, shut_tlimit),
    }


def _margin(
    temp: Optional[int],
    threshold: Optional[int],
    tlimit: Optional[int],
    tlimit_threshold: Optional[int],
) -> Optional[int]:
    if temp is not None and threshold is not None:
        return threshold - temp
    if tlimit is not None and tlimit_threshold is not None:
        return tlimit - tlimit_threshold
    return None


def _power(gpu: ET.Element) -> Dict[str, Any]:
    readings = _first(gpu.find("gpu_power_readings"), gpu.find("power_readings"))
    draw = _first(
        _number(_text(readings, "instant_power_draw")),
        _number(_text(readings, "power_draw")),
        _number(_text(readings, "average_power_draw")),
    )
    limit = _first(
        _number(_text(readings, "current_power_limit")),
        _number(_text(readings, "enforced_power_limit")),
        _number(_text(readings, "power_limit")),
    )
    return {"draw_w": draw, "limit_w": limit}


def _pcie(gpu: ET.Element) -> Dict[str, Any]:
    link = gpu.find("pci/pci_gpu_link_info")
    return {
        "gen": _int(_text(link, "pcie_gen/current_link_gen")),
        "gen_max": _int(_text(link, "pcie_gen/max_link_gen")),
        "width": _int(_text(link, "link_widths/current_link_width")),
        "width_max": _int(_text(link, "link_widths/max_link_width")),
        "replays": _int(_text(gpu, "pci/replay_counter")),
    }


def _fabric(gpu: ET.Element) -> Dict[str, Any]:
    return {
        "state": _text(gpu, "fabric/state"),
        "status": _text(gpu, "fabric/status"),
        "clique_id": _text(gpu, "fabric/cliqueId"),
        "cluster_uuid": _text(gpu, "fabric/clusterUuid"),
    }


def parse_gpu_xml(gpu: ET.Element, index: int) -> Dict[str, Any]:
    """One <gpu> element of `nvidia-smi -q -x` -> its health facts."""
    bus_id = _first(_text(gpu, "pci/pci_bus_id"), gpu.get("id"))
    return {
        "index": index,
        "gpu": _label(index, bus_id),
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "serial": _text(gpu, "serial"),
        "pci_bus_id": bus_id,
        "persistence_mode": _text(gpu, "persistence_mode"),
        "compute_mode": _text(gpu, "compute_mode"),
        "mig_mode": _text(gpu, "mig_mode/current_mig"),
        "gsp_firmware": _text(gpu, "gsp_firmware_version"),
        "vbios": _text(gpu, "vbios_version"),
        "performance_state": _text(gpu, "performance_state"),
        "recovery_action": _text(gpu, "gpu_recovery_action"),
        "ecc": _ecc(gpu),
        "remapped_rows": _remapped_rows(gpu),
        "retired_pages": _retired_pages(gpu),
        "clock_events": _clock_events(gpu),
        "temperature": _temperature(gpu),
        "power": _power(gpu),
        "clocks": {
            "sm_mhz": _int(_text(gpu, "clocks/sm_clock")),
            "sm_max_mhz": _int(_text(gpu, "max_clocks/sm_clock")),
        },
        "pcie": _pcie(gpu),
        "fabric": _fabric(gpu),
        "nvlink": None,
    }


def parse_smi_xml(text: str) -> Dict[str, Any]:
    """`nvidia-smi -q -x` -> driver and CUDA versions and one dict per GPU, in nvidia-smi's index
    order (the order of the <gpu> elements). Raises ET.ParseError on text that is not XML."""
    start = text.find("<nvidia_smi_log")
    root = ET.fromstring(text[start:] if start > 0 else text)  # drops the DOCTYPE line
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpus": [parse_gpu_xml(gpu, i) for i, gpu in enumerate(root.findall("gpu"))],
    }


# ---------------------------------------------------------------- --query-gpu (fallback)


def parse_query_health(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-gpu=<QUERY_FIELDS or a subset> --format=csv` -> the same per-GPU shape as
    the XML gives, with what the query cannot say (fabric, thresholds, names) left null."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [cell.split("[")[0].strip() for cell in lines[0].split(",")]
    gpus = []
    for position, line in enumerate(lines[1:]):
        row = dict(zip(header, (cell.strip() for cell in line.split(","))))

        def value(column: str, row: Dict[str, str] = row) -> Optional[str]:
            raw = row.get(column)
            return None if raw is None or not raw or MISSING_VALUE.match(raw) else raw

        index = _first(_int(value("index")), position)
        bus_id = value("pci.bus_id")
        active = decode_clock_event_reasons(value("clocks_event_reasons.active"))
        reasons = None if active is None else {name: name in active for name in CLOCK_EVENT_NAMES}
        temp = _int(value("temperature.gpu"))
        remapped = {
            "correctable": _int(value("remapped_rows.correctable")),
            "uncorrectable": _int(value("remapped_rows.uncorrectable")),
            "pending": _yes(value("remapped_rows.pending")),
            "failure": _yes(value("remapped_rows.failure")),
        }
        pending_pages = _yes(value("retired_pages.pending"))
        gpus.append(
            {
                "index": index,
                "gpu": _label(index, bus_id),
                "name": None,
                "uuid": value("uuid"),
                "serial": None,
                "pci_bus_id": bus_id,
                "persistence_mode": value("persistence_mode"),
                "compute_mode": value("compute_mode"),
                "mig_mode": None,
                "gsp_firmware": None,
                "vbios": None,
                "performance_state": None,
                "recovery_action": None,
                "ecc": {
                    "mode": value("ecc.mode.current"),
                    "pending_mode": None,
                    "volatile": {
                        "corrected": _int(value("ecc.errors.corrected.volatile.total")),
                        "uncorrected": _int(value("ecc.errors.uncorrected.volatile.total")),
                    },
                    "aggregate": {
                        "corrected": _int(value("ecc.errors.corrected.aggregate.total")),
                        "uncorrected": _int(value("ecc.errors.uncorrected.aggregate.total")),
                    },
                    "sram_threshold_exceeded": None,
                    "unrepairable_memory": None,
                },
                "remapped_rows": remapped
                if any(v is not None for v in remapped.values())
                else None,
                "retired_pages": None
                if pending_pages is None
                else {"single_bit": None, "double_bit": None, "pending": pending_pages},
                "clock_events": _clock_summary(reasons, None),
                "temperature": {
                    "gpu_c": temp,
                    "memory_c": None,
                    "slowdown_c": None,
                    "shutdown_c": None,
                    "tlimit_c": None,
                    "slowdown_margin_c": None,
                    "shutdown_margin_c": None,
                },
                "power": {
                    "draw_w": _number(value("power.draw")),
                    "limit_w": _number(value("power.limit")),
                },
                "clocks": {
                    "sm_mhz": _int(value("clocks.current.sm")),
                    "sm_max_mhz": _int(value("clocks.max.sm")),
                },
                "pcie": {
                    "gen": _int(value("pcie.link.gen.current")),
                    "gen_max": _int(value("pcie.link.gen.max")),
                    "width": _int(value("pcie.link.width.current")),
                    "width_max": _int(value("pcie.link.width.max")),
                    "replays": None,
                },
                "fabric": {"state": None, "status": None, "clique_id": None, "cluster_uuid": None},
                "nvlink": None,
            }
        )
    return gpus


# ---------------------------------------------------------------- nvidia-smi nvlink -s / -e


def _nvlink_blocks(text: str) -> List[Tuple[int, Optional[str], List[str]]]:
    """Split `nvidia-smi nvlink ...` output into (gpu index, uuid, its lines)."""
    blocks: List[Tuple[int, Optional[str], List[str]]] = []
    for line in text.splitlines():
        match = NVLINK_GPU.match(line.strip())
        if match:
            blocks.append((int(match.group(1)), match.group(2), []))
        elif blocks and line.strip():
            blocks[-1][2].append(line)
    return blocks


def parse_nvlink_status(text: str) -> Dict[str, Dict[str, Any]]:
    """`nvidia-smi nvlink -s` -> {gpu index: {"uuid", "links": {link: GB/s or None (inactive)}}}.
    A GPU without links (PCIe cards) has an empty "links"."""
    result: Dict[str, Dict[str, Any]] = {}
    for index, uuid, lines in _nvlink_blocks(text):
        links: Dict[str, Optional[float]] = {}
        for line in lines:
            match = NVLINK_LINK.match(line)
            if match:
                speed = NVLINK_SPEED.match(match.group(2))
                links[match.group(1)] = float(speed.group(1)) if speed else None
        result[str(index)] = {"uuid": uuid, "links": links}
    return result


def _counter_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def _is_error_counter(name: str) -> bool:
    """Counters that mean a fault when non-zero: errors of any kind and failed recoveries (not
    packet or byte counts, successful recoveries, or error rates)."""
    if name.endswith("_ber") or "successful" in name:
        return False
    return "error" in name or "failed" in name


def parse_nvlink_errors(text: str) -> Dict[str, Dict[str, Any]]:
    """`nvidia-smi nvlink -e` -> {gpu index: {"uuid", "links": {link: {counter: int or text}}}}.
    Reads both layouts: `Link 0: Replay Errors: 0` and a `Link 0:` line with indented counters."""
    result: Dict[str, Dict[str, Any]] = {}
    for index, uuid, lines in _nvlink_blocks(text):
        links: Dict[str, Dict[str, Any]] = {}
        current: Optional[str] = None
        for line in lines:
            match = NVLINK_LINK.match(line)
            if match:
                current = match.group(1)
                links.setdefault(current, {})
                rest = match.group(2)
            elif current is not None:
                rest = line.strip()
            else:
                continue
            counter = NVLINK_COUNTER.match(rest) if rest else None
            if counter:
                raw = counter.group(2)
                links[current][_counter_name(counter.group(1))] = int(raw) if raw.isdigit() else raw
        result[str(index)] = {"uuid": uuid, "links": links}
    return result


def _nvlink_for_gpu(
    gpu: Dict[str, Any],
    status: Optional[Dict[str, Dict[str, Any]]],
    errors: Optional[Dict[str, Dict[str, Any]]],
) -> Optional[Dict[str, Any]]:
    """The GPU's NVLink summary, matched by UUID (else by index); None when it has no links."""
    mine = _match_nvlink(gpu, status)
    if mine is None or not mine["links"]:
        return None
    links = mine["links"]
    down = sorted((int(link) for link, speed in links.items() if speed is None))
    counters = _match_nvlink(gpu, errors)
    totals: Optional[Dict[str, int]] = None
    with_errors: Optional[List[str]] = None
    if counters is not None:
        totals = {}
        with_errors = []
        for link in sorted(counters["links"], key=int):
            for name, value in sorted(counters["links"][link].items()):
                if isinstance(value, int) and _is_error_counter(name):
                    totals[name] = totals.get(name, 0) + value
                    if value:
                        with_errors.append("link %s %s=%d" % (link, name, value))
    return {
        "links": len(links),
        "active": len(links) - len(down),
        "down": down,
        "speeds_gbs": sorted(set(speed for speed in links.values() if speed is not None)),
        "error_totals": totals,
        "error_total": None if totals is None else sum(totals.values()),
        "links_with_errors": with_errors,
    }


def _match_nvlink(
    gpu: Dict[str, Any], parsed: Optional[Dict[str, Dict[str, Any]]]
) -> Optional[Dict[str, Any]]:
    if parsed is None:
        return None
    for entry in parsed.values():
        if gpu.get("uuid") and entry.get("uuid") == gpu["uuid"]:
            return entry
    return parsed.get(str(gpu["index"]))


# ---------------------------------------------------------------- kernel log


def _stamp(line: str) -> Tuple[Optional[str], Optional[float], str]:
    """(wall time as printed, seconds since boot, the rest) of one kernel-log line."""
    wall: Optional[str] = None
    syslog = SYSLOG_STAMP.match(line)
    if syslog:
        wall, line = syslog.group(1), line[syslog.end() :]
    ctime = CTIME_STAMP.match(line)
    if ctime:
        wall, line = _first(wall, ctime.group(1)), line[ctime.end() :]
    uptime = UPTIME_STAMP.match(line)
    if uptime:
        return wall, float(uptime.group(1)), line[uptime.end() :]
    return wall, None, line


def since_last_boot(text: str) -> str:
    """A syslog file (kern.log) spans boots: only what follows the last boot's first lines."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if KERNEL_BOOT_LINE.search(line)]
    return "\n".join(lines[starts[-1] :]) if starts else text


def parse_kernel_log(text: str, gpus: Sequence[Dict[str, Any]] = ()) -> Dict[str, Any]:
    """XID and SXID events, and 'fallen off the bus' lines, from dmesg / journalctl -k / kern.log
    text; each XID names its GPU (matched by PCI bus) where nvidia-smi listed it."""
    by_bus = {_short_bus(g.get("pci_bus_id")): g.get("gpu") for g in gpus}
    xids: List[Dict[str, Any]] = []
    sxids: List[Dict[str, Any]] = []
    fell_off: List[str] = []
    named: Optional[str] = None  # the GPU the last "GPU <bus>" line named
    for raw in text.splitlines():
        if "NVRM" not in raw and "SXid" not in raw:
            continue
        wall, uptime, line = _stamp(raw.rstrip())
        match = XID_LINE.search(line)
        if match:
            number = int(match.group("xid"))
            xids.append(
                {
                    "xid": number,
                    "pci": match.group("pci"),
                    "gpu": by_bus.get(_short_bus(match.group("pci"))),
                    "time": wall,
                    "uptime_s": uptime,
                    "meaning": XID_MEANINGS.get(number, "see NVIDIA's Xid catalog"),
                    "text": match.group("rest")[:EXCERPT],
                }
            )
            continue
        match = SXID_LINE.search(line)
        if match:
            sxids.append(
                {
                    "sxid": int(match.group("xid")),
                    "pci": match.group("pci"),
                    "time": wall,
                    "uptime_s": uptime,
                    "text": match.group("rest")[:EXCERPT],
                }
            )
            continue
        # Newer drivers split the message: "NVRM: The NVIDIA GPU 0000:b3:00.0" then, two
        # continuation lines later, "NVRM: fallen off the bus and is not responding to commands."
        match = NAMED_GPU_LINE.search(line)
        if match:
            named = match.group("pci")
        if "fallen off the bus" in line and named and named not in fell_off:
            fell_off.append(named)
    counts: Dict[str, int] = {}
    for event in xids:
        counts[str(event["xid"])] = counts.get(str(event["xid"]), 0) + 1
    return {"xids": xids, "xid_counts": counts, "sxids": sxids, "fell_off_bus": fell_off}


def kernel_log_result(
    source: Optional[str],
    text: Optional[str],
    tried: Dict[str, str],
    gpus: Sequence[Dict[str, Any]],
) -> Dict[str, Any]:
    if source is None or text is None:
        return {
            "readable": False,
            "source": None,
            "why": NOT_READABLE_LOG,
            "tried": tried,
            "xids": None,
            "xid_counts": None,
            "sxids": None,
            "fell_off_bus": None,
        }
    parsed = parse_kernel_log(text, gpus)
    return dict(readable=True, source=source, why=None, tried=tried, **parsed)


# ---------------------------------------------------------------- kernel module, IOMMU, ACS


def parse_module_version(text: Optional[str]) -> Dict[str, Any]:
    """/proc/driver/nvidia/version -> the kernel module's flavour (open / proprietary) and version."""
    if not text or not text.strip():
        return {"flavour": None, "version": None, "banner": None}
    first = text.strip().splitlines()[0]
    match = MODULE_VERSION.search(first)
    return {
        "flavour": "open" if "Open Kernel Module" in first else "proprietary",
        "version": match.group(1) if match else None,
        "banner": " ".join(first.split())[:EXCERPT],
    }


def driver_versions(
    smi_version: Optional[str], module: Mapping[str, Any], smi_error: Optional[str]
) -> Dict[str, Any]:
    """nvidia-smi's (NVML's) driver version against the loaded kernel module's."""
    nvml = smi_version
    if nvml is None and smi_error:
        match = NVML_LIB_VERSION.search(smi_error)
        nvml = match.group(1) if match else None
    kernel = module.get("version")
    match_: Optional[bool] = None
    if nvml and kernel:
        match_ = nvml == kernel
    elif smi_error and "version mismatch" in smi_error.lower():
        match_ = False
    return {"nvidia_smi": nvml, "kernel_module": kernel, "versions_match": match_}


def parse_cmdline(text: Optional[str]) -> Dict[str, str]:
    """The IOMMU-related settings of /proc/cmdline (intel_iommu, amd_iommu, iommu, iommu.*, pci)."""
    found: Dict[str, str] = {}
    for token in (text or "").split():
        key, _, value = token.partition("=")
        if key in ("intel_iommu", "amd_iommu", "iommu", "pci") or key.startswith("iommu."):
            found[key] = value
    return found


def iommu_mode(
    cmdline: Mapping[str, str], groups: Optional[int], group_types: Sequence[Optional[str]]
) -> Optional[str]:
    """off | passthrough | translation, or None when it cannot be told.

    The groups' own type (kernel 5.11+) decides: identity is passthrough, DMA / DMA-FQ translate.
    Without it: no groups is off, iommu=pt or iommu.passthrough=1 is passthrough."""
    known = [t for t in group_types if t]
    if known:
        if any(t.startswith("DMA") for t in known):
            return "translation"
        if all(t == "identity" for t in known):
            return "passthrough"
    if groups == 0:
        return "off"
    if groups is None:
        return None
    if cmdline.get("iommu") == "pt" or cmdline.get("iommu.passthrough") == "1":
        return "passthrough"
    if cmdline.get("iommu") == "off" or "off" in (
        cmdline.get("intel_iommu"),
        cmdline.get("amd_iommu"),
    ):
        return "off"
    return None


def bridges_above(device_path: str) -> List[str]:
    """/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0 -> ['0000:40:01.1'] (the device's own
    address and the root complex are not bridges above it)."""
    parts = [p for p in device_path.split("/") if BDF.match(p)]
    return parts[:-1]


def parse_acs_control(flags_text: str) -> Dict[str, bool]:
    """'SrcValid+ TransBlk- ReqRedir+ ...' -> {"SrcValid": True, "TransBlk": False, ...}."""
    flags: Dict[str, bool] = {}
    for token in flags_text.split():
        if token[:-1] in ACS_FLAGS and token[-1] in "+-":
            flags[token[:-1]] = token[-1] == "+"
    return flags


def parse_lspci_acs(text: str) -> Dict[str, Dict[str, Any]]:
    """`lspci -vvv` (all devices or `-s BDF`) -> {bdf: {"acs_ctl": text or None, "readable": bool}}
    for each device shown. A device without an ACS capability has acs_ctl None; `<access denied>`
    (lspci as a user cannot read extended capabilities) makes it not readable."""
    devices: Dict[str, Dict[str, Any]] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        device = LSPCI_DEVICE.match(line)
        if device:
            current = device.group(1).lower()
            if current.count(":") == 1:
                current = "0000:" + current
            devices[current] = {"acs_ctl": None, "readable": True}
            continue
        if current is None:
            continue
        if "<access denied>" in line:
            devices[current]["readable"] = False
        match = ACSCTL_LINE.search(line)
        if match:
            devices[current]["acs_ctl"] = " ".join(match.group(1).split())
    return devices


def parse_acs_config(config: bytes) -> Dict[str, Any]:
    """A device's PCI config space (sysfs `config`) -> its ACS Control flags, read from the ACS
    extended capability (ID 0x000D). Only root reads past the first 64 (or 256) bytes."""
    if len(config) <= PCI_EXT_CAP_START:
        return {"readable": False, "acs_ctl": None}
    offset, seen = PCI_EXT_CAP_START, set()
    while offset and offset + 8 <= len(config) and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == ACS_EXT_CAP_ID:
            control = int.from_bytes(config[offset + 6 : offset + 8], "little")
            text = " ".join(
                "%s%s" % (name, "+" if control & (1 << bit) else "-")
                for bit, name in enumerate(ACS_FLAGS)
            )
            return {"readable": True, "acs_ctl": text}
        offset = (header >> 20) & 0xFFC
    return {"readable": True, "acs_ctl": None}


def acs_summary(
    bridges: Mapping[str, Sequence[str]], readings: Mapping[str, Mapping[str, Any]]
) -> Dict[str, Any]:
    """Per bridge above a GPU: its ACS Control and whether ACS is on (any flag set: SrcValid+,
    ReqRedir+, CmpltRedir+ ... send peer-to-peer traffic up to the root complex or the IOMMU)."""
    rows = []
    unreadable = []
    for bridge in sorted(bridges):
        reading = readings.get(bridge) or {"readable": False, "acs_ctl": None}
        flags = parse_acs_control(reading["acs_ctl"]) if reading.get("acs_ctl") else {}
        enabled: Optional[bool] = any(flags.values()) if reading.get("readable") else None
        if not reading.get("readable"):
            unreadable.append(bridge)
        rows.append(
            {
                "bridge": bridge,
                "gpus": sorted(bridges[bridge]),
                "acs_ctl": reading.get("acs_ctl"),
                "enabled": enabled,
            }
        )
    return {
        "readable": not unreadable,
        "why": ("not readable: needs root (%s)" % ", ".join(unreadable)) if unreadable else None,
        "bridges": rows,
        "enabled": [row["bridge"] for row in rows if row["enabled"]],
    }


# ---------------------------------------------------------------- the probe's data


def build_data(
    xml_text: Optional[str],
    nvlink_status: Optional[str],
    nvlink_errors: Optional[str],
    module_text: Optional[str],
    kernel_log: Tuple[Optional[str], Optional[str], Dict[str, str]] = (None, None, {}),
    host: Optional[Mapping[str, Any]] = None,
    query_text: Optional[str] = None,
    smi_error: Optional[str] = None,
) -> Dict[str, Any]:
    """The probe's `data` from its commands' outputs (None: that command gave nothing) and the
    host facts collect() read from /proc and /sys (`host`: cmdline, iommu groups and types,
    ACS readings, loaded modules, GPUs on the PCI bus)."""
    host = host or {}
    errors: Dict[str, str] = {}
    smi: Dict[str, Any] = {"driver_version": None, "cuda_version": None, "gpus": []}
    if xml_text is not None:
        try:
            smi = parse_smi_xml(xml_text)
        except ET.ParseError as exc:
            errors["nvidia-smi -q -x"] = "not XML: %s" % exc
    if not smi["gpus"] and query_text is not None:
        smi["gpus"] = parse_query_health(query_text)
    gpus = smi["gpus"]
    status = parse_nvlink_status(nvlink_status) if nvlink_status is not None else None
    counters = parse_nvlink_errors(nvlink_errors) if nvlink_errors is not None else None
    for gpu in gpus:
        gpu["nvlink"] = _nvlink_for_gpu(gpu, status, counters)
    module = parse_module_version(module_text)
    cmdline = parse_cmdline(host.get("cmdline"))
    group_types = host.get("gpu_group_types") or {}
    bridges: Dict[str, List[str]] = {}
    for gpu in gpus:
        for bridge in (host.get("gpu_bridges") or {}).get(
            _short_bus(gpu.get("pci_bus_id")) or "", []
        ):
            bridges.setdefault(bridge, []).append(gpu["gpu"])
    source, log_text, tried = kernel_log
    return {
        "nvidia_smi_error": smi_error,
        "driver_version": smi["driver_version"],
        "cuda_version": smi["cuda_version"],
        "gpu_count": len(gpus),
        "gpus_on_pci_bus": host.get("pci_gpus"),
        "gpus": gpus,
        "kernel_module": module,
        "driver": driver_versions(smi["driver_version"], module, smi_error),
        "kernel_log": kernel_log_result(source, log_text, dict(tried), gpus),
        "iommu": {
            "cmdline": cmdline,
            "groups": host.get("iommu_groups"),
            "gpu_groups": host.get("gpu_groups") or {},
            "gpu_group_types": group_types,
            "mode": iommu_mode(cmdline, host.get("iommu_groups"), list(group_types.values())),
        },
        "acs": acs_summary(bridges, host.get("acs") or {}),
        "peermem": {
            "nvidia_peermem_loaded": host.get("nvidia_peermem"),
            "kernel_dma_buf": host.get("kernel_dma_buf"),
            "dma_buf_possible": _dma_buf(module, host.get("kernel_dma_buf")),
        },
        "command_errors": errors,
    }


def _dma_buf(module: Mapping[str, Any], kernel_dma_buf: Optional[bool]) -> Optional[bool]:
    """GPUDirect RDMA through dma-buf needs the open kernel module and a kernel with dma-buf."""
    if module.get("flavour") is None:
        return None
    if module["flavour"] != "open":
        return False
    return kernel_dma_buf


# ---------------------------------------------------------------- touching the host


def _start(argv: Sequence[str]) -> Optional["subprocess.Popen[bytes]"]:
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ, LC_ALL="C"),
        )
    except OSError:
        return None


def _finish(
    proc: Optional["subprocess.Popen[bytes]"], deadline: float
) -> Tuple[Optional[int], str, str]:
    """(exit code or None when it did not finish, stdout, stderr) of a started command."""
    if proc is None:
        return None, "", "could not start"
    try:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return None, out.decode("utf-8", "replace"), "timed out"
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _read(path: str, binary: bool = False, limit: int = -1) -> Any:
    try:
        with open(path, "rb" if binary else "r") as handle:
            return handle.read(limit)
    except (OSError, UnicodeDecodeError):
        return None


def _why(rc: Optional[int], out: str, err: str) -> str:
    message = (err.strip() or out.strip()).splitlines()
    text = message[-1] if message else ""
    return ("%s (exit code %s)" % (text, rc)).strip() if rc is not None else (text or "timed out")


def _kernel_log(
    dmesg: Optional["subprocess.Popen[bytes]"], deadline: float
) -> Tuple[Optional[str], Optional[str], Dict[str, str]]:
    """dmesg, then journalctl -k (this boot), then /var/log/kern.log: the first that is readable."""
    tried: Dict[str, str] = {}
    if dmesg is not None:
        rc, out, err = _finish(dmesg, deadline)
        if rc == 0 and out.strip():
            return "dmesg", out, tried
        tried["dmesg"] = _why(rc, out, err) or "empty"
    else:
        tried["dmesg"] = "not found"
    journalctl = shutil.which("journalctl")
    if journalctl:
        proc = _start([journalctl, "-k", "-b", "--no-pager", "-q"])
        rc, out, err = _finish(proc, time.monotonic() + LOG_TIMEOUT_S)
        denied = (
            "insufficient permissions" in (out + err).lower()
            or "not seeing messages" in (out + err).lower()
        )
        if rc == 0 and out.strip() and not denied:
            return "journalctl -k", out, tried
        tried["journalctl -k"] = _why(rc, out, err) or "empty"
    else:
        tried["journalctl -k"] = "not found"
    try:
        with open(KERN_LOG, "r", errors="replace") as handle:
            return KERN_LOG, since_last_boot(handle.read()), tried
    except OSError as exc:
        tried[KERN_LOG] = exc.strerror or str(exc)
    return None, None, tried


def _pci_gpus() -> Dict[str, str]:
    """NVIDIA display controllers on the PCI bus: {short bus: sysfs device path}."""
    found: Dict[str, str] = {}
    try:
        names = os.listdir(SYS_PCI)
    except OSError:
        return found
    for name in names:
        base = os.path.join(SYS_PCI, name)
        vendor = (_read(os.path.join(base, "vendor")) or "").strip()
        klass = (_read(os.path.join(base, "class")) or "").strip()
        if vendor == "0x10de" and (klass.startswith("0x0300") or klass.startswith("0x0302")):
            found[_short_bus(name) or name] = os.path.realpath(base)
    return found


def _iommu_facts(pci_gpus: Mapping[str, str]) -> Dict[str, Any]:
    try:
        groups: Optional[int] = len(os.listdir(SYS_IOMMU_GROUPS))
    except OSError:
        groups = None
    gpu_groups: Dict[str, Optional[str]] = {}
    gpu_types: Dict[str, Optional[str]] = {}
    for bus, path in sorted(pci_gpus.items()):
        link = os.path.join(path, "iommu_group")
        group = os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None
        gpu_groups[bus] = group
        kind = _read(os.path.join(link, "type")) if group else None
        gpu_types[bus] = kind.strip() if kind else None
    return {"iommu_groups": groups, "gpu_groups": gpu_groups, "gpu_group_types": gpu_types}


def _acs_readings(bridges: Sequence[str], deadline: float) -> Dict[str, Dict[str, Any]]:
    """Each bridge's ACS Control: `lspci -vvv -s BDF` where lspci is installed, else its sysfs
    config space (what lspci reads; both need root for the extended capabilities)."""
    readings: Dict[str, Dict[str, Any]] = {}
    lspci = shutil.which("lspci")
    if lspci:
        procs = {bridge: _start([lspci, "-vvv", "-s", bridge]) for bridge in bridges}
        for bridge, proc in procs.items():
            rc, out, _err = _finish(proc, deadline)
            reading = parse_lspci_acs(out).get(bridge) if rc == 0 else None
            readings[bridge] = reading or {"readable": False, "acs_ctl": None}
        return readings
    for bridge in bridges:
        config = _read(os.path.join(SYS_PCI, bridge, "config"), binary=True)
        readings[bridge] = (
            parse_acs_config(config) if config is not None else {"readable": False, "acs_ctl": None}
        )
    return readings


def _kernel_dma_buf() -> Optional[bool]:
    """CONFIG_DMA_SHARED_BUFFER from /proc/config.gz or /boot/config-<release>, if readable."""
    text: Optional[str] = None
    try:
        with gzip.open("/proc/config.gz", "rt") as handle:
            text = handle.read()
    except OSError:
        text = _read("/boot/config-%s" % os.uname().release)
    if not text:
        return None
    return bool(re.search(r"^CONFIG_DMA_SHARED_BUFFER=y", text, re.MULTILINE))


def _host_facts(deadline: float) -> Dict[str, Any]:
    pci = _pci_gpus()
    facts = _iommu_facts(pci)
    gpu_bridges = {bus: bridges_above(path) for bus, path in pci.items()}
    unique = sorted(set(b for bridges in gpu_bridges.values() for b in bridges))
    facts.update(
        pci_gpus=len(pci),
        gpu_bridges=gpu_bridges,
        acs=_acs_readings(unique, deadline) if unique else {},
        cmdline=_read(PROC_CMDLINE),
        nvidia_peermem=os.path.isdir(os.path.join(SYS_MODULES, "nvidia_peermem")),
        kernel_dma_buf=_kernel_dma_buf(),
    )
    return facts


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Touch the host; return {"ok": bool, "data": {...}, "error": str | None}.

    Absent (ok False): no nvidia-smi, or nvidia-smi finds no GPU, or it fails on a host with no
    NVIDIA GPU on the PCI bus. A GPU whose driver does not answer is a health fact, not an
    absence: ok stays True and data.nvidia_smi_error says why.
    All commands start at once, each under its own timeout."""
    started = time.monotonic()
    timeout_s = float(options.get("timeout_s", COMMAND_TIMEOUT_S))
    deadline = started + timeout_s
    smi = shutil.which("nvidia-smi")
    dmesg_path = shutil.which("dmesg")
    dmesg = _start([dmesg_path]) if dmesg_path else None
    procs = {}
    if smi:
        procs = {
            args: _start([smi, *args])
            for args in (XML_ARGS, NVLINK_STATUS_ARGS, NVLINK_ERRORS_ARGS)
        }
    host = _host_facts(deadline)
    module_text = _read(PROC_VERSION)
    timings: Dict[str, float] = {}
    results: Dict[Tuple[str, ...], Tuple[Optional[int], str, str]] = {}
    for args, proc in procs.items():
        results[args] = _finish(proc, deadline)
        timings["nvidia-smi " + " ".join(args)] = round(time.monotonic() - started, 3)
    log = _kernel_log(dmesg, time.monotonic() + LOG_TIMEOUT_S)
    timings["kernel log"] = round(time.monotonic() - started, 3)
    if not smi:
        data = build_data(None, None, None, module_text, log, host)
        data["timings_s"] = timings
        return {"ok": False, "data": data, "error": "nvidia-smi not found"}
    errors: Dict[str, str] = {}

    def output(args: Tuple[str, ...]) -> Optional[str]:
        rc, out, err = results[args]
        if rc == 0:
            return out
        errors["nvidia-smi " + " ".join(args)] = _why(rc, out, err)
        return None

    xml_text = output(XML_ARGS)
    smi_error = errors.get("nvidia-smi -q -x")
    query_text = None
    if xml_text is not None and "</nvidia_smi_log>" not in xml_text:  # not XML, or cut short
        rc, out, _err = _finish(_start([smi, *QUERY_ARGS]), time.monotonic() + timeout_s)
        query_text = out if rc == 0 else None
    data = build_data(
        xml_text,
        output(NVLINK_STATUS_ARGS),
        output(NVLINK_ERRORS_ARGS),
        module_text,
        log,
        host,
        query_text=query_text,
        smi_error=smi_error,
    )
    data["nvidia_smi"] = smi
    data["command_errors"].update(errors)
    timings["total"] = round(time.monotonic() - started, 3)
    data["timings_s"] = timings
    if smi_error and "no devices were found" in smi_error.lower():
        return {"ok": False, "data": data, "error": "no GPU: " + smi_error}
    if smi_error and host.get("pci_gpus") == 0:
        why = "nvidia-smi fails and no NVIDIA GPU is on the PCI bus: " + smi_error
        return {"ok": False, "data": data, "error": why}
    return {"ok": True, "data": data, "error": None}


if __name__ == "__main__":
    import json
    import sys

    del sys.path[0]  # so that `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
