"""The kernel log's GPU events: NVIDIA XIDs, NVSwitch SXIDs and "fallen off the bus" lines, read
from dmesg, else journalctl -k, else /var/log/kern.log (this boot only).

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). The parsers are pure and golden-tested
(tests/probes/test_health.py); read_kernel_log touches the host. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import _host_io
from _pcie import short_bus

LOG_TIMEOUT_S = 5.0
NOT_READABLE_LOG = "not readable: needs root or CAP_SYSLOG"
KERN_LOG = "/var/log/kern.log"
EXCERPT = 200
# (where it came from, its text, why each source tried before it could not be read)
KernelLog = Tuple[Optional[str], Optional[str], Dict[str, str]]

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


# ---------------------------------------------------------------- parsing (pure)


def _stamp(line: str) -> Tuple[Optional[str], Optional[float], str]:
    """(wall time as printed, seconds since boot, the rest) of one kernel-log line."""
    wall: Optional[str] = None
    syslog = SYSLOG_STAMP.match(line)
    if syslog:
        wall, line = syslog.group(1), line[syslog.end() :]
    ctime = CTIME_STAMP.match(line)
    if ctime:
        wall, line = (wall if wall is not None else ctime.group(1)), line[ctime.end() :]
    uptime = UPTIME_STAMP.match(line)
    if uptime:
        return wall, float(uptime.group(1)), line[uptime.end() :]
    return wall, None, line


def since_last_boot(text: str) -> str:
    """A syslog file (kern.log) spans boots: only what follows the last boot's first lines."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if KERNEL_BOOT_LINE.search(line)]
    return "\n".join(lines[starts[-1] :]) if starts else text


def _xid(
    match: "re.Match[str]", wall: Optional[str], uptime: Optional[float], by_bus: Dict[Any, Any]
) -> Dict[str, Any]:
    number = int(match.group("xid"))
    return {
        "xid": number,
        "pci": match.group("pci"),
        "gpu": by_bus.get(short_bus(match.group("pci"))),
        "time": wall,
        "uptime_s": uptime,
        "meaning": XID_MEANINGS.get(number, "see NVIDIA's Xid catalog"),
        "text": match.group("rest")[:EXCERPT],
    }


def _sxid(match: "re.Match[str]", wall: Optional[str], uptime: Optional[float]) -> Dict[str, Any]:
    return {
        "sxid": int(match.group("xid")),
        "pci": match.group("pci"),
        "time": wall,
        "uptime_s": uptime,
        "text": match.group("rest")[:EXCERPT],
    }


class _Events(object):
    """What parse_kernel_log gathers, line by line."""

    def __init__(self, gpus: Sequence[Dict[str, Any]]) -> None:
        self.by_bus = {short_bus(g.get("pci_bus_id")): g.get("gpu") for g in gpus}
        self.xids: List[Dict[str, Any]] = []
        self.sxids: List[Dict[str, Any]] = []
        self.fell_off: List[str] = []
        self.named: Optional[str] = None  # the GPU the last "GPU <bus>" line named

    def read(self, raw: str) -> None:
        wall, uptime, line = _stamp(raw.rstrip())
        match = XID_LINE.search(line)
        if match:
            self.xids.append(_xid(match, wall, uptime, self.by_bus))
            return
        match = SXID_LINE.search(line)
        if match:
            self.sxids.append(_sxid(match, wall, uptime))
            return
        # Newer drivers split the message: "NVRM: The NVIDIA GPU 0000:b3:00.0" then, two
        # continuation lines later, "NVRM: fallen off the bus and is not responding to commands."
        match = NAMED_GPU_LINE.search(line)
        if match:
            self.named = match.group("pci")
        if "fallen off the bus" in line and self.named and self.named not in self.fell_off:
            self.fell_off.append(self.named)


def parse_kernel_log(text: str, gpus: Sequence[Dict[str, Any]] = ()) -> Dict[str, Any]:
    """XID and SXID events, and 'fallen off the bus' lines, from dmesg / journalctl -k / kern.log
    text; each XID names its GPU (matched by PCI bus) where nvidia-smi listed it."""
    events = _Events(gpus)
    for raw in text.splitlines():
        if "NVRM" in raw or "SXid" in raw:
            events.read(raw)
    counts: Dict[str, int] = {}
    for event in events.xids:
        counts[str(event["xid"])] = counts.get(str(event["xid"]), 0) + 1
    return {
        "xids": events.xids,
        "xid_counts": counts,
        "sxids": events.sxids,
        "fell_off_bus": events.fell_off,
    }


def kernel_log_result(
    source: Optional[str],
    text: Optional[str],
    tried: Dict[str, str],
    gpus: Sequence[Dict[str, Any]],
) -> Dict[str, Any]:
    """The probe's `kernel_log`: the events, or why no source could be read."""
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


# ---------------------------------------------------------------- touching the host


def _journal(tried: Dict[str, str]) -> Optional[str]:
    """This boot's kernel messages from journalctl -k, or None (and why in `tried`)."""
    journalctl = shutil.which("journalctl")
    if not journalctl:
        tried["journalctl -k"] = "not found"
        return None
    proc = _host_io.start([journalctl, "-k", "-b", "--no-pager", "-q"])
    outcome: Tuple[Optional[int], str, str] = _host_io.finish(
        proc, time.monotonic() + LOG_TIMEOUT_S
    )
    rc, out, err = outcome
    denied = (
        "insufficient permissions" in (out + err).lower()
        or "not seeing messages" in (out + err).lower()
    )
    if rc == 0 and out.strip() and not denied:
        return out
    tried["journalctl -k"] = _host_io.why(rc, out, err) or "empty"
    return None


def read_kernel_log(dmesg: Optional["subprocess.Popen[bytes]"], deadline: float) -> KernelLog:
    """dmesg (started by the caller, beside its other commands), then journalctl -k (this boot),
    then /var/log/kern.log: the first that is readable."""
    tried: Dict[str, str] = {}
    if dmesg is not None:
        rc, out, err = _host_io.finish(dmesg, deadline)
        if rc == 0 and out.strip():
            return "dmesg", out, tried
        tried["dmesg"] = _host_io.why(rc, out, err) or "empty"
    else:
        tried["dmesg"] = "not found"
    journal = _journal(tried)
    if journal is not None:
        return "journalctl -k", journal, tried
    try:
        with open(KERN_LOG, "r", errors="replace") as handle:
            return KERN_LOG, since_last_boot(handle.read()), tried
    except OSError as exc:
        tried[KERN_LOG] = exc.strerror or str(exc)
    return None, None, tried
