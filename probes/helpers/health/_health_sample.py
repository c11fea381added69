"""Counters that rise: the health probe's `--sample SECONDS`. The error counters are read twice,
SECONDS apart, and each one that is non-zero is reported with its change and its rate per hour: a
counter that is non-zero but still is a fact from the past, one that rises is happening now.

What is read (each a "kind" of counter row):
  nvidia-smi -q -x    ecc (volatile corrected / uncorrected), remapped_rows, pcie_replays,
                      clock_events (microseconds spent in each clock-event reason)
  nvidia-smi nvlink -e  nvlink (each link's error counters)
  sysfs               aer (/sys/bus/pci/devices/*/aer_dev_{correctable,fatal,nonfatal} of NVIDIA and
                      Mellanox devices), ib (/sys/class/infiniband/*/ports/*/counters/*)
and, once, the PCI bus itself: the NVIDIA GPUs (by bus id) and NVSwitches on it.

Not a probe (the leading underscore): a helper the health probe ships (`SHIPS`) and imports by
module name. Every sysfs read goes through `root` ("/" on a host, a fixture tree in the tests);
the comparison is pure. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from _nvlink import is_error_counter

SYS_PCI = "sys/bus/pci/devices"
SYS_INFINIBAND = "sys/class/infiniband"
NVIDIA = "0x10de"
MELLANOX = "0x15b3"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA-compatible and 3D controllers
NVSWITCH_CLASS = "0x0680"  # NVSwitches show as "Bridge: NVIDIA Corporation" (other bridge)
AER_FILES = (
    ("aer_dev_correctable", "correctable", "TOTAL_ERR_COR"),
    ("aer_dev_fatal", "fatal", "TOTAL_ERR_FATAL"),
    ("aer_dev_nonfatal", "nonfatal", "TOTAL_ERR_NONFATAL"),
)
# The error counters of an IB/RoCE port's counters/ (NVSentinel's allow-list of standard IB
# counters, less the traffic and wait counts): docs/configuration/nic-health-monitor.md.
IB_COUNTERS = (
    "link_downed",
    "symbol_error",
    "link_error_recovery",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_rcv_discards",
    "port_xmit_discards",
)
# Which source reads which kinds: a source that could not be read twice makes its kinds unknown.
SOURCES = {
    "nvidia-smi -q -x": ("ecc", "remapped_rows", "pcie_replays", "clock_events"),
    "nvidia-smi nvlink -e": ("nvlink",),
    "sysfs aer": ("aer",),
    "sysfs infiniband": ("ib",),
}
KINDS = tuple(kind for kinds in SOURCES.values() for kind in kinds)
NUMBER_LINE = re.compile(r"^\s*(\S+)\s+(\d+)\s*$")
SECONDS_PER_HOUR = 3600.0

Key = Tuple[str, str, Optional[str], str]  # (kind, device, port or None, counter)
Snapshot = Dict[Key, int]
Reads = Dict[str, Optional[Snapshot]]  # source -> its counters, None where it could not be read


# ---------------------------------------------------------------- sysfs


def _read(root: str, relative: str) -> Optional[str]:
    try:
        with open(os.path.join(root, relative), "rb") as handle:
            return handle.read(65536).decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return None


def _listdir(root: str, relative: str) -> Optional[List[str]]:
    try:
        return sorted(os.listdir(os.path.join(root, relative)))
    except OSError:
        return None


def scan_pci(root: str = "/") -> Optional[Dict[str, List[str]]]:
    """The PCI bus as sysfs shows it: NVIDIA GPUs (display or 3D class; bound to nvidia or to no
    driver) and NVSwitches by bus id, and the devices whose AER counters the sample reads (those
    and Mellanox NICs). None when /sys/bus/pci/devices cannot be listed."""
    names = _listdir(root, SYS_PCI)
    if names is None:
        return None
    found: Dict[str, List[str]] = {"gpus": [], "nvswitches": [], "aer_devices": []}
    for name in names:
        base = "%s/%s" % (SYS_PCI, name)
        vendor = (_read(root, base + "/vendor") or "").lower()
        klass = (_read(root, base + "/class") or "").lower()
        if vendor == NVIDIA and klass.startswith(GPU_CLASSES):
            if _driver(root, base) not in (None, "nvidia"):
                continue  # given to another driver on purpose (vfio-pci for a VM): not missing
            found["gpus"].append(name)
        elif vendor == NVIDIA and klass.startswith(NVSWITCH_CLASS):
            found["nvswitches"].append(name)
        elif vendor != MELLANOX:
            continue
        found["aer_devices"].append(name)
    return found


def _driver(root: str, base: str) -> Optional[str]:
    """The driver a PCI device is bound to (its `driver` link's name), None when unbound."""
    try:
        return os.path.basename(os.readlink(os.path.join(root, base, "driver")))
    except OSError:
        return None


def parse_aer(text: Optional[str], total_name: str) -> Optional[int]:
    """An aer_dev_* file ("RxErr 0\\nBadTLP 2\\n...\\nTOTAL_ERR_COR 2") -> its total; the sum of
    its lines where the kernel writes no TOTAL line; None when unreadable."""
    if text is None:
        return None
    values: Dict[str, int] = {}
    for line in text.splitlines():
        match = NUMBER_LINE.match(line)
        if match:
            values[match.group(1)] = int(match.group(2))
    if total_name in values:
        return values[total_name]
    return sum(values.values()) if values else None


def read_aer(root: str, devices: Sequence[str]) -> Snapshot:
    """AER totals of `devices` (bus ids) that have them (a kernel without AER has none)."""
    counters: Snapshot = {}
    for device in devices:
        for file_name, counter, total in AER_FILES:
            text = _read(root, "%s/%s/%s" % (SYS_PCI, device, file_name))
            value = parse_aer(text, total)
            if value is not None:
                counters[("aer", device, None, counter)] = value
    return counters


def read_ib(root: str = "/") -> Optional[Snapshot]:
    """Every RDMA port's error counters; {} without /sys/class/infiniband, None where it is there
    but cannot be listed."""
    devices = _listdir(root, SYS_INFINIBAND)
    if devices is None:
        return None if os.path.lexists(os.path.join(root, SYS_INFINIBAND)) else {}
    counters: Snapshot = {}
    for device in devices:
        for port in _listdir(root, "%s/%s/ports" % (SYS_INFINIBAND, device)) or []:
            base = "%s/%s/ports/%s/counters" % (SYS_INFINIBAND, device, port)
            for name in IB_COUNTERS:
                value = _int(_read(root, "%s/%s" % (base, name)))
                if value is not None:
                    counters[("ib", device, port, name)] = value
    return counters


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_sysfs(root: str, aer_devices: Optional[Sequence[str]]) -> Reads:
    """The sysfs half of one read."""
    return {
        "sysfs aer": read_aer(root, aer_devices) if aer_devices is not None else None,
        "sysfs infiniband": read_ib(root),
    }


# ---------------------------------------------------------------- nvidia-smi's counters


def smi_counters(gpus: Optional[Sequence[Mapping[str, Any]]]) -> Optional[Snapshot]:
    """The counters of `nvidia-smi -q -x` as parsed (_nvidia_smi_xml.parse_smi_xml's gpus), by
    GPU label; None when nvidia-smi gave nothing."""
    if not gpus:
        return None
    counters: Snapshot = {}
    for gpu in gpus:
        label = str(gpu.get("gpu"))
        volatile = (gpu.get("ecc") or {}).get("volatile") or {}
        _put(counters, ("ecc", label, None), volatile.items())
        _put(counters, ("remapped_rows", label, None), _remapped(gpu.get("remapped_rows")))
        _put(counters, ("pcie_replays", label, None), [("replays", _replays(gpu))])
        clock = (gpu.get("clock_events") or {}).get("counters_us") or {}
        _put(counters, ("clock_events", label, None), clock.items())
    return counters


def _remapped(rows: Optional[Mapping[str, Any]]) -> List[Tuple[str, Any]]:
    rows = rows or {}
    return [("correctable", rows.get("correctable")), ("uncorrectable", rows.get("uncorrectable"))]


def _replays(gpu: Mapping[str, Any]) -> Any:
    return (gpu.get("pcie") or {}).get("replays")


def _put(
    counters: Snapshot, where: Tuple[str, str, Optional[str]], values: Iterable[Tuple[str, Any]]
) -> None:
    kind, device, port = where
    for name, value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            counters[(kind, device, port, name)] = value


def nvlink_counters(
    gpus: Sequence[Mapping[str, Any]], parsed: Optional[Mapping[str, Mapping[str, Any]]]
) -> Optional[Snapshot]:
    """`nvidia-smi nvlink -e` as parsed (_nvlink.parse_nvlink_errors): each link's error counters,
    by GPU label (matched by UUID, else index) and `link N`; None when it was not read."""
    if parsed is None:
        return None
    by_uuid = dict((gpu.get("uuid"), gpu.get("gpu")) for gpu in gpus if gpu.get("uuid"))
    by_index = dict((str(gpu.get("index")), gpu.get("gpu")) for gpu in gpus)
    counters: Snapshot = {}
    for index, entry in parsed.items():
        label = by_uuid.get(entry.get("uuid")) or by_index.get(index) or "GPU%s" % index
        for link, values in (entry.get("links") or {}).items():
            errors = [(n, v) for n, v in values.items() if is_error_counter(n)]
            _put(counters, ("nvlink", str(label), "link %s" % link), errors)
    return counters


# ---------------------------------------------------------------- two reads compared (pure)


def compare(first: Reads, second: Reads, seconds: float) -> Dict[str, Any]:
    """The sample section: how many counters of each kind were read both times (None: a source
    that could not be read twice), and every counter non-zero at either read with its change and
    rate per hour (`per_hour`), rising or not. A counter that went down was reset between the
    reads (a driver reload, a port reset): its change is unknown (`reset: true`)."""
    read: Dict[str, Optional[int]] = {}
    rows: List[Dict[str, Any]] = []
    unreadable: List[str] = []
    for source, kinds in SOURCES.items():
        before, after = first.get(source), second.get(source)
        if before is None or after is None:
            read.update(dict.fromkeys(kinds))
            unreadable.append(source)
            continue
        common = sorted(set(before) & set(after), key=_sort_key)
        for kind in kinds:
            read[kind] = sum(1 for key in common if key[0] == kind)
        rows += [_row(key, before[key], after[key], seconds) for key in common]
    kept = [row for row in rows if row["first"] or row["last"]]
    return {
        "seconds": round(seconds, 3),
        "read": read,
        "counters": kept,
        "rising": sum(1 for row in kept if row["delta"]),
        "unreadable": unreadable,
        "why": None,
    }


def _sort_key(key: Key) -> Tuple[str, str, str, str]:
    return (key[0], key[1], key[2] or "", key[3])


def _row(key: Key, before: int, after: int, seconds: float) -> Dict[str, Any]:
    kind, device, port, counter = key
    reset = after < before
    delta = None if reset else after - before
    per_hour = None
    if delta is not None and seconds > 0:
        per_hour = round(delta * SECONDS_PER_HOUR / seconds, 1)
    return {
        "kind": kind,
        "device": device,
        "port": port,
        "counter": counter,
        "unit": "us" if kind == "clock_events" else "count",
        "first": before,
        "last": after,
        "delta": delta,
        "per_hour": per_hour,
        "reset": reset,
    }


def not_sampled(why: str) -> Dict[str, Any]:
    """The sample section when no second read could be made."""
    return {
        "seconds": None,
        "read": dict.fromkeys(KINDS),
        "counters": [],
        "rising": None,
        "unreadable": sorted(SOURCES),
        "why": why,
    }
