"""The PCI bus as sysfs, lspci and /proc/cmdline show it: PCI addresses, the bridges above a GPU
and their ACS control, IOMMU groups and mode, the CPUs next to a device.

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). The parsers are pure and golden-tested
(tests/probes/test_health.py); the readers at the end touch the host. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import _host_io

SYS_PCI = "/sys/bus/pci/devices"
SYS_IOMMU_GROUPS = "/sys/kernel/iommu_groups"
BDF = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
LONG_BDF = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.[0-7]$")
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


# ---------------------------------------------------------------- PCI addresses


def short_bus(bus_id: Optional[str]) -> Optional[str]:
    """00000000:A1:00.0, 0000:a1:00.0 and the kernel log's 0000:a1:00 -> 'a1:00' (bus:device)."""
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) < 2:
        return None
    return "%s:%s" % (parts[-2][-2:], parts[-1].split(".")[0])


def bus_key(bus_id: Any) -> Optional[Tuple[int, int, int]]:
    """'00000000:18:00.0' or [domain, bus, device] -> (domain, bus, device), to match nvidia-smi's
    PCI address with torch's."""
    if isinstance(bus_id, (list, tuple)) and len(bus_id) == 3:
        return int(bus_id[0]), int(bus_id[1]), int(bus_id[2])
    found = LONG_BDF.match(str(bus_id))
    if not found:
        return None
    return int(found.group(1) or "0", 16), int(found.group(2), 16), int(found.group(3), 16)


def bridges_above(device_path: str) -> List[str]:
    """/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0 -> ['0000:40:01.1'] (the device's own
    address and the root complex are not bridges above it)."""
    parts = [p for p in device_path.split("/") if BDF.match(p)]
    return parts[:-1]


def parse_cpulist(text: str) -> List[int]:
    """'0-15,32-47' -> [0, …, 15, 32, …, 47] (a sysfs local_cpulist)."""
    cpus: List[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            cpus += range(int(low), int(high) + 1)
        elif part.strip():
            cpus.append(int(part))
    return cpus


# ---------------------------------------------------------------- ACS


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


# ---------------------------------------------------------------- IOMMU


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


# ---------------------------------------------------------------- touching the host


def pci_gpus() -> Dict[str, str]:
    """NVIDIA display controllers on the PCI bus: {short bus: sysfs device path}."""
    found: Dict[str, str] = {}
    try:
        names = os.listdir(SYS_PCI)
    except OSError:
        return found
    for name in names:
        base = os.path.join(SYS_PCI, name)
        vendor = (_host_io.read(os.path.join(base, "vendor")) or "").strip()
        klass = (_host_io.read(os.path.join(base, "class")) or "").strip()
        if vendor == "0x10de" and (klass.startswith("0x0300") or klass.startswith("0x0302")):
            found[short_bus(name) or name] = os.path.realpath(base)
    return found


def iommu_facts(gpus: Mapping[str, str]) -> Dict[str, Any]:
    """How many IOMMU groups there are, and each GPU's group and its type (by short bus)."""
    try:
        groups: Optional[int] = len(os.listdir(SYS_IOMMU_GROUPS))
    except OSError:
        groups = None
    gpu_groups: Dict[str, Optional[str]] = {}
    gpu_types: Dict[str, Optional[str]] = {}
    for bus, path in sorted(gpus.items()):
        link = os.path.join(path, "iommu_group")
        group = os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None
        gpu_groups[bus] = group
        kind = _host_io.read(os.path.join(link, "type")) if group else None
        gpu_types[bus] = kind.strip() if kind else None
    return {"iommu_groups": groups, "gpu_groups": gpu_groups, "gpu_group_types": gpu_types}


def acs_readings(bridges: Sequence[str], deadline: float) -> Dict[str, Dict[str, Any]]:
    """Each bridge's ACS Control: `lspci -vvv -s BDF` where lspci is installed, else its sysfs
    config space (what lspci reads; both need root for the extended capabilities)."""
    readings: Dict[str, Dict[str, Any]] = {}
    lspci = shutil.which("lspci")
    if lspci:
        procs = {bridge: _host_io.start([lspci, "-vvv", "-s", bridge]) for bridge in bridges}
        for bridge, proc in procs.items():
            rc, out, _err = _host_io.finish(proc, deadline)
            reading = parse_lspci_acs(out).get(bridge) if rc == 0 else None
            readings[bridge] = reading or {"readable": False, "acs_ctl": None}
        return readings
    for bridge in bridges:
        config = _host_io.read(os.path.join(SYS_PCI, bridge, "config"), binary=True)
        readings[bridge] = (
            parse_acs_config(config) if config is not None else {"readable": False, "acs_ctl": None}
        )
    return readings


def local_cpus(bus_id: Optional[str]) -> Optional[List[int]]:
    """The CPUs next to a GPU (sysfs local_cpulist) that this process may use, or None where not
    readable."""
    key = bus_key(bus_id) if bus_id else None
    if key is None:
        return None
    path = os.path.join(SYS_PCI, "%04x:%02x:%02x.0" % key, "local_cpulist")
    try:
        with open(path, encoding="ascii") as handle:
            cpus = parse_cpulist(handle.read())
    except (OSError, ValueError):
        return None
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(cpus)
    return sorted(set(cpus) & set(allowed)) or None
