"""Running NCCL jobs: the libnccl, libcudart, libcuda each process mapped, its GPUs, NCCL RAS's word.

Read-only: it reads /proc (maps, status, environ, thread names), asks `nvidia-smi
--query-compute-apps` once, and asks each NCCL RAS endpoint (localhost:28028, and every
NCCL_RAS_ADDR seen) for its status report; it never signals, traces or attaches to a process.

What it could not read is said: other users' processes whose maps are closed to this user are
counted by user under `unreadable` (those whose thread names, which /proc shows to anyone, show
NCCL at work are named one by one), and a RAS endpoint that does not answer within its short timeouts is reported
with the stage it stopped at. `problems.*` are lists, or null when they could not be judged (an
NCCL process here that no RAS report covers): a rule reading null is unknown, never a pass.

Outcome: ok is True whenever /proc could be scanned, also with no NCCL process at all (an idle host
is a fact, and rules are then n/a); ok is False only when /proc cannot be read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

TIMEOUT_S = 60
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py): a
# live job is not a host's configuration, so nothing here is a divergence between hosts.
FACTS = {
    "identity": ["local_addresses"],
    "volatile": [
        "processes",
        "unreadable",
        "gpu_apps",
        "ras",
        "communicators",
        "problems",
        "scan",
        "excluded_own",
    ],
}

PROC = "/proc"
# The libraries whose mapped files are reported, by kind (file names as the dynamic linker maps them).
LIBRARY_KINDS = (
    ("nccl", re.compile(r"^libnccl\.so(?:\.\d+)*$")),
    ("cudart", re.compile(r"^libcudart\.so(?:\.\d+)*$")),
    ("cuda", re.compile(r"^libcuda\.so(?:\.\d+)*$")),
)
MAPS_MARKER = b"libnccl"  # a process's maps are parsed only when this occurs in them
MAPS_LINE = re.compile(
    r"^([0-9a-f]+)-([0-9a-f]+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+):([0-9a-f]+)\s+(\d+)\s+(/.*)$"
)
DELETED = " (deleted)"
VERSION_IN_NAME = re.compile(r"\.so\.(\d+\.\d+(?:\.\d+)*)$")
# NCCL's VERSION_STRING: "NCCL version 2.28.9+cuda13.0".
NCCL_VERSION = re.compile(rb"NCCL version (\d+\.\d+\.\d+)(\+cuda[\d.]+)?")
# Reading .rodata alone: on the H200, libnccl 2.28.9 (218 MB) plus libcudart and libcuda cost
# 225 KB of reads and 2 ms in all.
RODATA_MAX_BYTES = 64 * 1024 * 1024
FALLBACK_SCAN_MAX_BYTES = 512 * 1024 * 1024  # no section table: the whole file, bounded
FALLBACK_SCAN_CHUNK = 8 * 1024 * 1024
LIBRARY_READ_BUDGET_S = 5.0  # all library reads of one run together
ENVIRON_MAX_BYTES = 1024 * 1024
THREAD_PREFIXES = ("NCCL", "pt_nccl")
CMDLINE_MAX_CHARS = 1000
MASK = "***"

# The environment a process shows: these names and every NCCL_* (values of secret-named ones masked).
ENV_ALLOWED = (
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",
)
ENV_PREFIX = "NCCL_"
# The same names the host runner masks (probes/_host_runner.py SECRET_NAME): a probe shares no code.
SECRET_NAME = re.compile(r"(?i)(TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)")
SECRET_OPTION = re.compile(
    r"(?i)^--?[\w.-]*(token|secret|passw|api[-_]?key|access[-_]?key|private[-_]?key|credential)"
)

NVIDIA_SMI_ARGS = ("--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader")
NVIDIA_SMI_TIMEOUT_S = 5.0

# NCCL RAS (src/ras/client.cc, client_support.cc in NVIDIA/nccl): a line protocol on TCP, then
# the report, then the server closes the connection. JSON from NCCL 2.28.7 on, text before.
RAS_DEFAULT = "localhost:28028"
RAS_PROTOCOL = 2
RAS_CONNECT_TIMEOUT_S = 1.0
RAS_READ_TIMEOUT_S = 3.0  # each handshake reply; a stopped process costs this much
RAS_COLLECTIVE_TIMEOUT_S = 2  # sent as `TIMEOUT n`: how long RAS waits for the other processes
RAS_EXTRA_TIMEOUT_S = 5.0  # NCCL's RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC on top of that
RAS_ATTEMPTS = 6  # connections per endpoint at most (SO_REUSEPORT spreads them over listeners)
RAS_BUDGET_S = 20.0  # every endpoint together
RAS_REPORT_MAX_BYTES = 16 * 1024 * 1024
RAS_LINE_MAX_BYTES = 64 * 1024
# ncclResult_t: 0 ncclSuccess, 7 ncclInProgress; anything else is an error.
NCCL_RESULTS = {
    0: "success",
    1: "unhandled CUDA error",
    2: "system error",
    3: "internal error",
    4: "invalid argument",
    5: "invalid usage",
    6: "remote error",
    7: "in progress",
}
NOT_AN_ERROR = (0, 7)
EXCERPT_CHARS = 80


# ---------------------------------------------------------------- pure parsers: /proc


def parse_maps(text: str) -> Dict[str, List[Dict[str, Any]]]:
    """/proc/PID/maps -> the libnccl, libcudart and libcuda files mapped, by kind; one entry per
    file (the first mapping's address range, to open it through /proc/PID/map_files)."""
    found: Dict[str, List[Dict[str, Any]]] = {kind: [] for kind, _ in LIBRARY_KINDS}
    seen = set()
    for line in text.splitlines():
        match = MAPS_LINE.match(line)
        if not match:
            continue
        start, end, major, minor, inode, path = match.groups()
        deleted = path.endswith(DELETED)
        if deleted:
            path = path[: -len(DELETED)]
        name = os.path.basename(path)
        kind = next((k for k, pattern in LIBRARY_KINDS if pattern.match(name)), None)
        if kind is None or (path, inode) in seen:
            continue
        seen.add((path, inode))
        found[kind].append(
            {
                "path": path,
                "device": "%s:%s" % (major, minor),
                "inode": int(inode),
                "deleted": deleted,
                "range": "%s-%s" % (start, end),
            }
        )
    return found


def parse_environ(raw: bytes) -> Dict[str, str]:
    """/proc/PID/environ (NUL-separated KEY=value) -> a dict; entries without '=' are skipped."""
    environ: Dict[str, str] = {}
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep and key:
            environ[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return environ


def allowed_environment(environ: Dict[str, str]) -> Dict[str, str]:
    """The allow-list (ENV_ALLOWED and NCCL_*), a secret-named variable's value masked."""
    shown = {}
    for key in sorted(environ):
        if key in ENV_ALLOWED or key.startswith(ENV_PREFIX):
            shown[key] = MASK if SECRET_NAME.search(key) else environ[key]
    return shown


def secret_values(environ: Dict[str, str]) -> List[str]:
    """Values of the secret-named variables (8 characters or more), longest first: masked in the
    command line, where `--api-key $KEY` puts them."""
    found = set(v for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= 8)
    return sorted(found, key=len, reverse=True)


def mask_cmdline(args: Sequence[str], secrets: Sequence[str] = ()) -> str:
    """The command line as one string: the value of a secret-named option (`--api-key X`,
    `--hf-token=X`) and every known secret value masked, cut to CMDLINE_MAX_CHARS."""
    shown: List[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("-"):
            shown.append(MASK)
            hide_next = False
            continue
        hide_next = False
        if SECRET_OPTION.match(arg):
            if "=" in arg:
                arg = arg.split("=", 1)[0] + "=" + MASK
            else:
                hide_next = True
        shown.append(arg)
    text = " ".join(shown)
    for secret in secrets:
        text = text.replace(secret, MASK)
    if len(text) > CMDLINE_MAX_CHARS:
        text = text[: CMDLINE_MAX_CHARS - 1] + "…"
    return text


def parse_cmdline(raw: bytes) -> List[str]:
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def parse_status(text: str) -> Dict[str, Any]:
    """/proc/PID/status -> name, state (R, S, D, T, t, Z, ...), ppid, real uid, and the pid in the
    process's own (innermost) pid namespace, which is what it reports to NCCL RAS."""
    fields: Dict[str, Any] = {"name": None, "state": None, "ppid": None, "uid": None}
    fields["ns_pid"] = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "Name":
            fields["name"] = value
        elif key == "State":
            fields["state"] = value.split()[0] if value else None
        elif key == "PPid" and value.isdigit():
            fields["ppid"] = int(value)
        elif key == "Uid" and value.split():
            fields["uid"] = int(value.split()[0])
        elif key == "NSpid" and value.split():
            fields["ns_pid"] = int(value.split()[-1])
    return fields


def parse_compute_apps(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader`."""
    apps = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        memory = re.match(r"^(\d+)", cells[2]) if len(cells) > 2 else None
        apps.append(
            {
                "pid": int(cells[0]),
                "gpu_uuid": cells[1],
                "used_memory_mib": int(memory.group(1)) if memory else None,
            }
        )
    return apps


def parse_fib_trie(text: str) -> List[str]:
    """/proc/net/fib_trie -> this host's IPv4 addresses (the `/32 host LOCAL` entries)."""
    found: List[str] = []
    last = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|--") or stripped.startswith("+--"):
            last = stripped[3:].strip().split("/")[0]
        elif "/32 host LOCAL" in stripped and last and last not in found:
            found.append(last)
    return sorted(found)


def parse_if_inet6(text: str) -> List[str]:
    """/proc/net/if_inet6 -> this host's IPv6 addresses, in the short form RAS prints."""
    found = []
    for line in text.splitlines():
        cells = line.split()
        if cells and len(cells[0]) == 32:
            try:
                packed = bytes.fromhex(cells[0])
                found.append(socket.inet_ntop(socket.AF_INET6, packed))
            except (ValueError, OSError):
                continue
    return sorted(set(found))


TCP_LISTEN = "0A"


def parse_net_tcp(text: str) -> List[Dict[str, Any]]:
    """/proc/net/tcp or tcp6 -> the listening sockets: {address, port, uid, inode}. Addresses are
    kernel hex in host byte order per 32-bit word ("0100007F:6D7C" is 127.0.0.1:28028)."""
    found = []
    for line in text.splitlines()[1:]:
        cells = line.split()
        if len(cells) < 10 or cells[3] != TCP_LISTEN or ":" not in cells[1]:
            continue
        hex_address, hex_port = cells[1].split(":")
        try:
            raw = bytes.fromhex(hex_address)
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            family = socket.AF_INET if len(words) == 4 else socket.AF_INET6
            address = socket.inet_ntop(family, words)
            found.append(
                {
                    "address": address,
                    "port": int(hex_port, 16),
                    "uid": int(cells[7]),
                    "inode": int(cells[9]),
                }
            )
        except (ValueError, OSError):
            continue
    return found


def endpoint_text(address: str, port: int) -> str:
    return "[%s]:%d" % (address, port) if ":" in address else "%s:%d" % (address, port)


def hidepid_from_mountinfo(text: str) -> bool:
    """Whether /proc is mounted with hidepid (other users' processes invisible, not just closed)."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/proc":
            options = line.split(" - ", 1)[-1]
            match = re.search(r"hidepid=(\w+)", options)
            if match and match.group(1) not in ("0", "off"):
                return True
    return False


def version_from_name(path: str) -> Optional[str]:
    """libcuda.so.580.159.03 -> "580.159.03"; libnccl.so.2 or libcudart.so.13 say nothing."""
    match = VERSION_IN_NAME.search(os.path.basename(path))
    return match.group(1) if match else None


def thread_kinds(names: Iterable[str]) -> List[str]:
    """The threads that show NCCL at work, numbers dropped: torch's ProcessGroupNCCL names its
    own ("pt_nccl_watchdg", "pt_nccl_heartbt"); NCCL names its threads ("NCCL RAS", "NCCL
    Service  3") only with NCCL_SET_THREAD_NAME=1. Thread names are readable by every user."""
    kinds = set()
    for name in names:
        if name.startswith(THREAD_PREFIXES):
            kinds.add(re.sub(r"[\s\d]+$", "", name).strip())
    return sorted(kinds)


# ---------------------------------------------------------------- pure parsers: ELF


ELF_HEADER = struct.Struct("16sHHIQQQIHHHHHH")  # ELF64, byte order from e_ident
SECTION = struct.Struct("IIQQQQIIQQ")
PROGRAM = struct.Struct("IIQQQQQQ")
PT_NOTE = 4
NT_GNU_BUILD_ID = 3


def elf_layout(read_at: Callable[[int, int], bytes]) -> Dict[str, Any]:
    """Where the build id note and .rodata are, from the ELF headers alone (a few KB read).

    `read_at(offset, size)` reads the file. Returns {"build_id": hex or None, "rodata": (offset,
    size) or None, "error": why not, or None}."""
    layout: Dict[str, Any] = {"build_id": None, "rodata": None, "error": None}
    ident = read_at(0, 64)
    if len(ident) < 64 or ident[:4] != b"\x7fELF":
        layout["error"] = "not an ELF file"
        return layout
    if ident[4] != 2:
        layout["error"] = "not a 64-bit ELF file"
        return layout
    order = "<" if ident[5] == 1 else ">"
    header = struct.unpack(order + ELF_HEADER.format, ident)
    phoff, shoff = header[5], header[6]
    phentsize, phnum, shentsize, shnum, shstrndx = header[9:14]
    sections = _sections(read_at, order, shoff, shentsize, shnum, shstrndx)
    for name, offset, size in sections:
        if name == ".note.gnu.build-id":
            layout["build_id"] = _build_id(read_at(offset, min(size, 4096)), order)
        elif name == ".rodata":
            layout["rodata"] = (offset, size)
    if layout["build_id"] is None:  # no section table (stripped): the PT_NOTE segments
        for offset, size in _note_segments(read_at, order, phoff, phentsize, phnum):
            layout["build_id"] = _build_id(read_at(offset, min(size, 65536)), order)
            if layout["build_id"]:
                break
    return layout


def _sections(
    read_at: Callable[[int, int], bytes], order: str, shoff: int, size: int, count: int, names: int
) -> List[Tuple[str, int, int]]:
    if not shoff or size != SECTION.size or not 0 < count < 65536 or names >= count:
        return []
    table = read_at(shoff, size * count)
    if len(table) < size * count:
        return []
    rows = [struct.unpack_from(order + SECTION.format, table, i * size) for i in range(count)]
    strings = read_at(rows[names][4], min(rows[names][5], 1024 * 1024))
    found = []
    for row in rows:
        end = strings.find(b"\0", row[0])
        name = strings[row[0] : end if end >= 0 else None].decode("ascii", "replace")
        found.append((name, row[4], row[5]))
    return found


def _note_segments(
    read_at: Callable[[int, int], bytes], order: str, phoff: int, size: int, count: int
) -> List[Tuple[int, int]]:
    if not phoff or size != PROGRAM.size or not 0 < count < 65536:
        return []
    table = read_at(phoff, size * count)
    rows = [
        struct.unpack_from(order + PROGRAM.format, table, i * size)
        for i in range(len(table) // size)
    ]
    return [(row[2], row[5]) for row in rows if row[0] == PT_NOTE]


def _build_id(notes: bytes, order: str) -> Optional[str]:
    """The NT_GNU_BUILD_ID descriptor, in hex, from a run of ELF notes."""
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from(order + "III", notes, at)
        name_at = at + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        if desc_at + descsz > len(notes):
            return None
        if kind == NT_GNU_BUILD_ID and notes[name_at : name_at + namesz].rstrip(b"\0") == b"GNU":
            return notes[desc_at : desc_at + descsz].hex()
        at = desc_at + ((descsz + 3) & ~3)
    return None


def nccl_version_in(data: bytes) -> Optional[str]:
    """ "2.28.9+cuda13.0" from NCCL's VERSION_STRING inside `data`, if there."""
    match = NCCL_VERSION.search(data)
    return (match.group(1) + (match.group(2) or b"")).decode("ascii") if match else None


# ---------------------------------------------------------------- pure parsers: NCCL RAS


def parse_endpoint(text: str) -> Tuple[str, int]:
    """NCCL_RAS_ADDR as NCCL reads it: host:port, [v6]:port, or a host alone (port 28028)."""
    text = text.strip()
    default_port = int(RAS_DEFAULT.rsplit(":", 1)[1])
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:  # a bare host, or a bare IPv6 address
        host, port = text, ""
    if port and not port.isdigit():
        raise ValueError("not a port: %r" % port)
    return host or "localhost", int(port) if port else default_port


def parse_json_report(text: str) -> Dict[str, Any]:
    """VERBOSE STATUS after `SET FORMAT json` -> the report, each communicator with its findings
    (see communicator_findings). Raises ValueError when it is not NCCL's JSON."""
    document = json.loads(text)
    if not isinstance(document, dict) or not isinstance(document.get("communicators"), list):
        raise ValueError("JSON without a communicators list")
    ras: Dict[str, Any] = document["ras"] if isinstance(document.get("ras"), dict) else {}
    communicators = [
        communicator_findings(comm) for comm in document["communicators"] if isinstance(comm, dict)
    ]
    return {
        "format": "json",
        "nccl_version": document.get("nccl_version"),
        "cuda_runtime_version": document.get("cuda_runtime_version"),
        "cuda_driver_version": document.get("cuda_driver_version"),
        "timestamp": document.get("timestamp"),
        "collection_time_s": ras.get("collection_time_sec"),
        "timeouts_count": ras.get("timeouts_count"),
        "communicators": communicators,
    }


def communicator_findings(comm: Dict[str, Any]) -> Dict[str, Any]:
    """One communicator of the JSON report, as NCCL gave it, plus what its text report would say:
    status (RUNNING, INIT, FINALIZE, ABORT, or several joined by '+'), the ranks with an
    initialisation or asynchronous error, and the collective counts that differ between ranks
    (count_ranges {op: [min, max]}; lagging_ranks: ranks below the maximum of such an op)."""
    ranks = [r for r in comm.get("ranks") or [] if isinstance(r, dict)]
    missing = [r for r in comm.get("missing_ranks") or [] if isinstance(r, dict)]
    statuses = sorted({_rank_status(r.get("status") or {}) for r in ranks})
    ranges: Dict[str, List[int]] = {}
    for op in sorted({op for r in ranks for op in (r.get("collective_counts") or {})}):
        counts = [(r.get("collective_counts") or {}).get(op) for r in ranks]
        numbers = [c for c in counts if isinstance(c, int)]
        if numbers and min(numbers) != max(numbers):
            ranges[op] = [min(numbers), max(numbers)]
    lagging = sorted(
        {
            r.get("rank")
            for r in ranks
            for op, (_, high) in ranges.items()
            if (r.get("collective_counts") or {}).get(op, high) < high
        },
        key=lambda rank: (rank is None, rank),
    )
    return {
        "hash": comm.get("hash"),
        "size": comm.get("size"),
        "ranks_count": comm.get("ranks_count"),
        "missing_ranks_count": comm.get("missing_ranks_count"),
        "status": "+".join(statuses) if statuses else None,
        "ranks": ranks,
        "missing_ranks": missing,
        "init_error_ranks": _error_ranks(ranks, "init_state"),
        "async_error_ranks": _error_ranks(ranks, "async_error"),
        "counts_differ": bool(ranges),
        "count_ranges": ranges,
        "lagging_ranks": lagging,
    }


def _rank_status(status: Dict[str, Any]) -> str:
    """NCCL's own order (client_support.cc): abort, then finalize/destroy, then init state."""
    if status.get("abort_flag"):
        return "ABORT"
    if status.get("finalize_called") or status.get("destroy_flag"):
        return "FINALIZE"
    return "RUNNING" if status.get("init_state") == 0 else "INIT"


def _error_ranks(ranks: List[Dict[str, Any]], field: str) -> List[Dict[str, Any]]:
    found = []
    for rank in ranks:
        code = (rank.get("status") or {}).get(field)
        if isinstance(code, int) and code not in NOT_AN_ERROR:
            found.append(
                {
                    "rank": rank.get("rank"),
                    "host": rank.get("host"),
                    "pid": rank.get("pid"),
                    "cuda_dev": rank.get("cuda_dev"),
                    "code": code,
                    "error": NCCL_RESULTS.get(code, "error %d" % code),
                }
            )
    return found


TEXT_VERSION = re.compile(r"^NCCL version (\S+) compiled with CUDA (\S+)")
TEXT_CUDA = re.compile(r"^CUDA runtime version (-?\d+), driver version (-?\d+)")
TEXT_COMMS = re.compile(r"^Communicators\.\.\.(?: \((\d+(?:\.\d+)?)s\))?")
TEXT_GROUP = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:-\d+)?)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$"
)
TEXT_BLOCK = re.compile(r"^(?:#(\d+)-(\d+) \(([0-9a-f]+)\) )?([A-Z]+)$")
TEXT_RANK = re.compile(
    r"^\s*Rank (\d+)(?: (has status \S+|reported .+?|has launched up to operation \d+"
    r"|has not launched any operations))? -- (?:GPU (\S+)(?: \(NVML \d+\))? managed by process "
    r"(\d+) on node (\S+)|\[process information not found\])"
)
TEXT_PROCESS = re.compile(r"^\s*Process (\d+) on node (\S+) managing GPUs? (.+)$")
TEXT_SECTIONS = ("Job summary", "Communicators", "Errors", "Warnings")


def parse_text_report(text: str) -> Dict[str, Any]:
    """STATUS (the text report) -> version, job summary, communicator groups, and each block of
    its Errors and Warnings sections with the ranks and processes it names."""
    report: Dict[str, Any] = {
        "format": "text",
        "nccl_version": None,
        "cuda_compiled": None,
        "cuda_runtime_version": None,
        "cuda_driver_version": None,
        "job": {},
        "collection_time_s": None,
        "groups": [],
        "errors": [],
        "warnings": [],
        "complete": False,
    }
    sections = _text_sections(text.splitlines())
    for line in sections.get("", []):
        version, cuda = TEXT_VERSION.match(line), TEXT_CUDA.match(line)
        if version:
            report["nccl_version"], report["cuda_compiled"] = version.groups()
        elif cuda:
            report["cuda_runtime_version"] = int(cuda.group(1))
            report["cuda_driver_version"] = int(cuda.group(2))
    report["job"] = _job_summary(sections.get("Job summary", []))
    for line in sections.get("Communicators", []):
        timing = TEXT_COMMS.match(line)
        group = TEXT_GROUP.match(line)
        if timing and timing.group(1):
            report["collection_time_s"] = float(timing.group(1))
        elif group:
            report["groups"].append(_group(group.groups()))
    report["errors"] = _blocks(sections.get("Errors", []))
    report["warnings"] = _blocks(sections.get("Warnings", []))
    report["complete"] = "Warnings" in sections  # the last section: the report came whole
    return report


def _text_sections(lines: List[str]) -> Dict[str, List[str]]:
    """Lines by section: a title line underlined with '=' opens one ("" holds what comes first).
    The Communicators title keeps its own line (it carries the collection time)."""
    sections: Dict[str, List[str]] = {"": []}
    current = ""
    for i, line in enumerate(lines):
        underlined = i + 1 < len(lines) and re.match(r"^=+$", lines[i + 1].strip() or "-")
        title = next((t for t in TEXT_SECTIONS if line.startswith(t)), None)
        if title and (underlined or title == "Communicators"):
            current = title
            sections[current] = [line] if title == "Communicators" else []
            continue
        if re.match(r"^=+$", line.strip() or "-"):
            continue
        sections[current].append(line)
    return sections


def _job_summary(lines: List[str]) -> Dict[str, Any]:
    """The job summary table: the consistent form has one row of 5 numbers; the others end with
    a totals block headed `(total)    (total)      (total)`."""
    rows = [[int(n) for n in line.split()] for line in lines if re.match(r"^[\s\d]+$", line)]
    rows = [row for row in rows if row]
    summary: Dict[str, Any] = {}
    five = next((row for row in rows if len(row) == 5), None)
    if five:
        keys = ("nodes", "processes_per_node", "gpus_per_process", "processes", "gpus")
        return dict(zip(keys, five))
    totals = [row for row in rows if len(row) == 3]
    if totals:
        summary.update(zip(("nodes", "processes", "gpus"), totals[-1]))
    return summary


def _group(cells: Tuple[str, ...]) -> Dict[str, Any]:
    keys = ("group", "comms", "nodes_per_comm", "ranks_per_node", "ranks_per_comm")
    group: Dict[str, Any] = {k: int(v) if v.isdigit() else v for k, v in zip(keys, cells)}
    group.update(ranks_in_group=int(cells[5]), status=cells[6], errors=cells[7])
    return group


def _blocks(lines: List[str]) -> List[Dict[str, Any]]:
    """The blocks of an Errors or Warnings section: a title line (`INCOMPLETE`, `DEAD`, `TIMEOUT`,
    `#0-0 (44d8c595d392cba8) MISMATCH`), then indented lines naming ranks and processes."""
    blocks: List[Dict[str, Any]] = []
    block: Optional[Dict[str, Any]] = None
    part = None
    for line in lines:
        if not line.strip():
            block = None
            continue
        title = TEXT_BLOCK.match(line.strip()) if not line.startswith(" ") else None
        if title:
            block = {
                "kind": title.group(4),
                "comm": "0x" + (title.group(3).lstrip("0") or "0") if title.group(3) else None,
                "lines": [],
                "ranks": [],
                "processes": [],
            }
            blocks.append(block)
            part = None
            continue
        if block is None:
            continue
        block["lines"].append(line.strip())
        part = _part_of(line, part)
        rank, process = TEXT_RANK.match(line), TEXT_PROCESS.match(line)
        if rank:
            number, detail, gpu, pid, host = rank.groups()
            block["ranks"].append(
                {
                    "rank": int(number),
                    "detail": detail or part,
                    "gpu": gpu,
                    "pid": int(pid) if pid else None,
                    "host": host,
                }
            )
        elif process:
            block["processes"].append(
                {"pid": int(process.group(1)), "host": process.group(2), "gpus": process.group(3)}
            )
    return blocks


def _part_of(line: str, part: Optional[str]) -> Optional[str]:
    """Which sub-list of a block the rank lines below belong to (an ERROR block lists the
    initialisation errors, then the asynchronous ones; a MISMATCH block each op in turn)."""
    text = line.strip()
    if text.startswith("Initialization error"):
        return "initialization error"
    if text.startswith("Asynchronous error"):
        return "asynchronous error"
    counts = re.match(r"^Communicator ranks have different (\w+) operation counts", text)
    if counts:
        return "different %s counts" % counts.group(1)
    if text.startswith("Communicator ranks have different status"):
        return "different status"
    return part


# ---------------------------------------------------------------- pure: what is wrong


def problems(
    processes: List[Dict[str, Any]],
    communicators: List[Dict[str, Any]],
    text_reports: List[Dict[str, Any]],
    uncovered: List[str],
) -> Dict[str, Any]:
    """Each kind of problem as a list of sentences, or None when it could not be judged: some
    NCCL process here (`uncovered`, named) is in no RAS report and nothing was found wrong.

    A stopped (T), traced (t) or zombie (Z) NCCL process here is a dead rank whatever RAS says."""
    missing: List[str] = []
    for process in processes:
        if process.get("state") in ("T", "t", "Z") and runs_nccl(process):
            missing.append(
                "pid %s (%s) is %s: its ranks and RAS are frozen"
                % (process["pid"], _short(process.get("cmdline")), _state_word(process["state"]))
            )
    async_errors: List[str] = []
    mismatches: List[str] = []
    for comm in communicators:
        name = "comm %s" % comm.get("hash")
        for rank in comm.get("missing_ranks") or []:
            status = rank.get("status") or {}
            why = (
                "considered dead"
                if status.get("considered_dead")
                else "unresponsive"
                if status.get("unresponsive")
                else "answered without this communicator"
            )
            missing.append("%s rank %s: %s (%s)" % (name, rank.get("rank"), _where(rank), why))
        for rank in comm.get("async_error_ranks") or []:
            async_errors.append(
                "%s rank %s: %s (%s)" % (name, rank["rank"], rank["error"], _where(rank))
            )
        for op, (low, high) in sorted((comm.get("count_ranges") or {}).items()):
            mismatches.append(
                "%s %s: ranks at %d..%d (behind: rank %s)"
                % (name, op, low, high, ", ".join(str(r) for r in comm.get("lagging_ranks") or []))
            )
    for report in text_reports:
        _text_problems(report, missing, async_errors, mismatches)
    judged = not uncovered
    return {
        "missing_ranks": missing if missing or judged else None,
        "async_errors": async_errors if async_errors or judged else None,
        "count_mismatches": mismatches if mismatches or judged else None,
        "uncovered": uncovered,
    }


def runs_nccl(process: Dict[str, Any]) -> bool:
    """Whether a process that mapped libnccl shows it runs NCCL: it serves RAS, RAS names its
    ranks, or (NCCL_SET_THREAD_NAME=1) it has NCCL's threads."""
    return bool(process.get("ras_listener") or process.get("ranks") or process.get("nccl_threads"))


def _text_problems(
    report: Dict[str, Any], missing: List[str], async_errors: List[str], mismatches: List[str]
) -> None:
    for block in report.get("errors") or []:
        name = "comm %s" % block["comm"] if block["comm"] else "job"
        if block["kind"] in ("INCOMPLETE", "DEAD"):
            why = "considered dead" if block["kind"] == "DEAD" else "no RAS answer"
            for process in block["processes"]:
                missing.append("%s: %s (%s)" % (name, _where(process), why))
            for rank in block["ranks"]:
                missing.append("%s rank %s: %s (%s)" % (name, rank["rank"], _where(rank), why))
        elif block["kind"] == "ERROR":
            for rank in block["ranks"]:
                if rank["detail"] and "asynchronous" in rank["detail"]:
                    async_errors.append("%s rank %s: %s" % (name, rank["rank"], _where(rank)))
                elif rank["detail"] and rank["detail"].startswith("reported"):
                    async_errors.append(
                        "%s rank %s %s: %s" % (name, rank["rank"], rank["detail"], _where(rank))
                    )
    for block in report.get("warnings") or []:
        if block["kind"] == "MISMATCH":
            differ = [line for line in block["lines"] if "operation counts" in line]
            if differ:
                mismatches.append("comm %s: %s" % (block["comm"], "; ".join(differ)))


def _where(item: Dict[str, Any]) -> str:
    gpu = item.get("gpu") if item.get("gpu") is not None else item.get("cuda_dev")
    text = "pid %s on %s" % (item.get("pid"), item.get("host"))
    return text + (", GPU %s" % gpu if gpu is not None else "")


def _state_word(state: str) -> str:
    return {"T": "stopped", "t": "stopped by a tracer", "Z": "a zombie"}.get(state, state)


def _short(text: Optional[str]) -> str:
    text = " ".join((text or "?").split())  # a `python -c SOURCE` command line spans lines
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def _excerpt(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return repr(text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "...")


# ---------------------------------------------------------------- touching the host: /proc


def read_bytes(path: str, limit: int = -1) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(limit)


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8", "replace")


class Scan:
    """One pass over /proc: the processes that mapped a libnccl, and what could not be read."""

    def __init__(self, proc: str = PROC, own_root: Optional[int] = None) -> None:
        self.proc = proc
        self.own_root = own_root  # the fleet runner: it and its descendants are not jobs
        self.candidates: Dict[int, str] = {}  # pid -> its maps text
        self.unreadable: Dict[int, str] = {}  # pid -> why
        self.entries = 0
        self.maps_bytes = 0

    def run(self) -> None:
        own = os.getpid()
        for entry in os.listdir(self.proc):
            if not entry.isdigit():
                continue
            pid = int(entry)
            self.entries += 1
            if pid == own:
                continue
            try:
                raw = read_bytes("%s/%d/maps" % (self.proc, pid))
            except (PermissionError, IsADirectoryError) as exc:
                self.unreadable[pid] = type(exc).__name__
                continue
            except OSError:  # gone meanwhile
                continue
            self.maps_bytes += len(raw)
            if MAPS_MARKER in raw:
                self.candidates[pid] = raw.decode("utf-8", "replace")

    def is_own(self, pid: int) -> bool:
        """Whether `pid` is the runner or descends from it (a probe that imported torch)."""
        if self.own_root is None:
            return False
        seen = 0
        while pid > 1 and seen < 64:
            if pid == self.own_root:
                return True
            try:
                pid = parse_status(read_text("%s/%d/status" % (self.proc, pid)))["ppid"] or 0
            except OSError:
                return False
            seen += 1
        return False


def thread_names(proc: str, pid: int, limit: int = 4096) -> List[str]:
    """The names of a process's threads (/proc/PID/task/*/comm, readable by every user)."""
    names = []
    try:
        tasks = os.listdir("%s/%d/task" % (proc, pid))
    except OSError:
        return []
    for tid in tasks[:limit]:
        try:
            names.append(read_text("%s/%d/task/%s/comm" % (proc, pid, tid)).strip())
        except OSError:
            continue
    return names


def socket_inodes(proc: str, pid: int, limit: int = 65536) -> List[int]:
    """The inodes of the sockets a process holds (/proc/PID/fd/N -> "socket:[INODE]")."""
    inodes = []
    try:
        fds = os.listdir("%s/%d/fd" % (proc, pid))
    except OSError:
        return []
    for fd in fds[:limit]:
        try:
            target = os.readlink("%s/%d/fd/%s" % (proc, pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.append(int(target[8:-1]))
    return inodes


class Listeners:
    """Listening TCP sockets by inode, read once per network namespace (a container has its own)."""

    def __init__(self, proc: str = PROC) -> None:
        self.proc = proc
        self.tables: Dict[str, Dict[int, str]] = {}

    def of(self, pid: int) -> List[Tuple[str, int]]:
        """(address, port) of each socket `pid` listens on."""
        try:
            namespace = os.readlink("%s/%d/ns/net" % (self.proc, pid))
        except OSError:
            namespace = "pid %d" % pid
        if namespace not in self.tables:
            table: Dict[int, str] = {}
            for name in ("tcp", "tcp6"):
                try:
                    text = read_text("%s/%d/net/%s" % (self.proc, pid, name))
                except OSError:
                    continue
                for entry in parse_net_tcp(text):
                    table[entry["inode"]] = endpoint_text(entry["address"], entry["port"])
            self.tables[namespace] = table
        table = self.tables[namespace]
        listening = [table[inode] for inode in socket_inodes(self.proc, pid) if inode in table]
        return [
            (text.rsplit(":", 1)[0].strip("[]"), int(text.rsplit(":", 1)[1]))
            for text in sorted(set(listening))
        ]


def user_name(uid: Optional[int], cache: Dict[int, str]) -> Optional[str]:
    if uid is None:
        return None
    if uid not in cache:
        try:
            import pwd

            cache[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            cache[uid] = str(uid)
    return cache[uid]


class Libraries:
    """Identity of each mapped library file, read once per (device, inode) and within a budget."""

    def __init__(self, proc: str = PROC, budget_s: float = LIBRARY_READ_BUDGET_S) -> None:
        self.proc = proc
        self.deadline = time.monotonic() + budget_s
        self.cache: Dict[Tuple[str, int], Dict[str, Any]] = {}
        self.bytes_read = 0
        self.seconds = 0.0

    def describe(self, pid: int, kind: str, mapped: Dict[str, Any]) -> Dict[str, Any]:
        key = (mapped["device"], mapped["inode"])
        if key not in self.cache:
            started = time.monotonic()
            self.cache[key] = self._identify(pid, kind, mapped)
            self.seconds += time.monotonic() - started
        entry = {"path": mapped["path"], "deleted": mapped["deleted"]}
        entry.update(self.cache[key])
        return entry

    def _identify(self, pid: int, kind: str, mapped: Dict[str, Any]) -> Dict[str, Any]:
        """Open the very file mapped: /proc/PID/map_files (root), else the path as the process
        sees it (/proc/PID/root/...), else the path; a file whose inode is not the mapped one
        (replaced on disk, or deleted) is not read as if it were."""
        identity: Dict[str, Any] = {
            "size": None,
            "version": version_from_name(mapped["path"]),
            "version_string": None,
            "build_id": None,
            "read_from": None,
            "error": None,
        }
        handle, where, error = self._open(pid, mapped)
        if handle is None:
            identity["error"] = error
            return identity
        with handle:
            identity["size"] = os.fstat(handle.fileno()).st_size
            identity["read_from"] = where
            if time.monotonic() > self.deadline:
                identity["error"] = "not read: the probe's library-reading budget is spent"
                return identity
            layout = elf_layout(lambda offset, size: self._read_at(handle, offset, size))
            identity["build_id"] = layout["build_id"]
            identity["error"] = layout["error"]
            if kind == "nccl":
                found = self._nccl_version(handle, layout.get("rodata"))
                identity["version_string"] = found
                if found:
                    identity["version"] = found.split("+")[0]
        return identity

    def _open(self, pid: int, mapped: Dict[str, Any]) -> Tuple[Any, Optional[str], Optional[str]]:
        tried = []
        for where, path in (
            ("map_files", "%s/%d/map_files/%s" % (self.proc, pid, mapped["range"])),
            ("process root", "%s/%d/root%s" % (self.proc, pid, mapped["path"])),
            ("path", mapped["path"]),
        ):
            if mapped["deleted"] and where != "map_files":
                tried.append("%s: deleted since it was mapped" % where)
                break
            try:
                handle = open(path, "rb")  # noqa: SIM115 (returned open: the caller closes it)
            except OSError as exc:
                tried.append("%s: %s" % (where, exc.strerror or type(exc).__name__))
                continue
            if os.fstat(handle.fileno()).st_ino != mapped["inode"] and where != "map_files":
                handle.close()
                tried.append("%s: another file now (the mapped one was replaced)" % where)
                break
            return handle, where, None
        return None, None, "; ".join(tried)

    def _read_at(self, handle: Any, offset: int, size: int) -> bytes:
        handle.seek(offset)
        data = handle.read(max(0, size))
        self.bytes_read += len(data)
        return bytes(data)

    def _nccl_version(self, handle: Any, rodata: Optional[Tuple[int, int]]) -> Optional[str]:
        if rodata:
            found = nccl_version_in(
                self._read_at(handle, rodata[0], min(rodata[1], RODATA_MAX_BYTES))
            )
            if found:
                return found
        tail = b""  # no .rodata, or the string elsewhere: the whole file, bounded
        handle.seek(0)
        read = 0
        while read < FALLBACK_SCAN_MAX_BYTES and time.monotonic() < self.deadline:
            chunk = handle.read(FALLBACK_SCAN_CHUNK)
            if not chunk:
                break
            read += len(chunk)
            self.bytes_read += len(chunk)
            found = nccl_version_in(tail + chunk)
            if found:
                return found
            tail = chunk[-64:]
        return None


def describe_process(
    proc: str,
    pid: int,
    maps_text: str,
    libraries: Libraries,
    users: Dict[int, str],
    listeners: Optional[Listeners] = None,
) -> Optional[Dict[str, Any]]:
    """Everything about one NCCL process; None when it ended meanwhile."""
    try:
        status = parse_status(read_text("%s/%d/status" % (proc, pid)))
        args = parse_cmdline(read_bytes("%s/%d/cmdline" % (proc, pid)))
    except OSError:
        return None
    environ: Dict[str, str] = {}
    env_error = None
    try:
        environ = parse_environ(read_bytes("%s/%d/environ" % (proc, pid), ENVIRON_MAX_BYTES))
    except OSError as exc:
        env_error = "%s: %s" % (type(exc).__name__, exc.strerror or exc)
    mapped = parse_maps(maps_text)
    threads = thread_kinds(thread_names(proc, pid))
    found = {
        kind: [libraries.describe(pid, kind, entry) for entry in entries]
        for kind, entries in mapped.items()
    }
    versions = sorted({lib["version"] for lib in found["nccl"] if lib["version"]})
    endpoint = ras_endpoint_of(environ) if env_error is None else RAS_DEFAULT
    listening = (listeners or Listeners(proc)).of(pid)
    return {
        "pid": pid,
        "ns_pid": status["ns_pid"] if status["ns_pid"] != pid else None,
        "user": user_name(status["uid"], users),
        "state": status["state"],
        "name": status["name"],
        "cmdline": mask_cmdline(args, secret_values(environ)),
        "libraries": found,
        "nccl_version": ",".join(versions) if versions else None,
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "env": allowed_environment(environ),
        "env_error": env_error,
        "ras_endpoint": endpoint,
        "ras_listener": ras_listener(endpoint, listening),
        "listening": [endpoint_text(address, port) for address, port in listening],
        "nccl_threads": threads,
        "gpus": [],
        "ranks": [],
    }


def ras_listener(endpoint: Optional[str], listening: List[Tuple[str, int]]) -> Optional[str]:
    """The socket on which this process serves RAS: one it listens on at its endpoint's port.
    (NCCL names its threads only with NCCL_SET_THREAD_NAME=1; this socket is always there.)"""
    if endpoint is None:
        return None
    try:
        port = parse_endpoint(endpoint)[1]
    except ValueError:
        return None
    found = [endpoint_text(a, p) for a, p in listening if p == port]
    return found[0] if found else None


def ras_endpoint_of(environ: Dict[str, str]) -> Optional[str]:
    """Where a process's RAS listens: NCCL_RAS_ADDR or the default; None with NCCL_RAS_ENABLE=0."""
    if environ.get("NCCL_RAS_ENABLE", "1").strip() == "0":
        return None
    return environ.get("NCCL_RAS_ADDR") or RAS_DEFAULT


def describe_unreadable(
    proc: str, unreadable: Dict[int, str], users: Dict[int, str], budget_s: float = 0.25
) -> Dict[str, Any]:
    """Counts by user, and each process whose thread names show NCCL at work (thread names are
    readable by every user; see thread_kinds)."""
    by_user: Dict[str, int] = {}
    nccl: List[Dict[str, Any]] = []
    deadline = time.monotonic() + budget_s
    threads_checked = True
    for pid in sorted(unreadable):
        try:
            uid = os.stat("%s/%d" % (proc, pid)).st_uid
        except OSError:
            continue
        user = user_name(uid, users) or "?"
        by_user[user] = by_user.get(user, 0) + 1
        if time.monotonic() > deadline:
            threads_checked = False
            continue
        kinds = thread_kinds(thread_names(proc, pid))
        if kinds:
            try:  # status and cmdline are readable by every user, environ and maps are not
                status = parse_status(read_text("%s/%d/status" % (proc, pid)))
                args = parse_cmdline(read_bytes("%s/%d/cmdline" % (proc, pid)))
            except OSError:
                continue
            nccl.append(
                {
                    "pid": pid,
                    "ns_pid": status["ns_pid"] if status["ns_pid"] != pid else None,
                    "user": user,
                    "state": status["state"],
                    "cmdline": mask_cmdline(args),
                    "nccl_threads": kinds,
                    "ras_endpoint": RAS_DEFAULT,  # its environment is closed: assumed
                    "ras_listener": None,
                    "listening": None,  # its sockets are closed to this user
                    "gpus": [],
                    "ranks": [],
                }
            )
    return {
        "count": sum(by_user.values()),
        "by_user": by_user,
        "nccl_processes": nccl,
        "threads_checked": threads_checked,
    }


def local_addresses(proc: str = PROC) -> List[str]:
    found: List[str] = []
    for name, parse in (("net/fib_trie", parse_fib_trie), ("net/if_inet6", parse_if_inet6)):
        try:
            found += parse(read_text("%s/%s" % (proc, name)))
        except OSError:
            continue
    return found


def hidepid(proc: str = PROC) -> Optional[bool]:
    try:
        return hidepid_from_mountinfo(read_text("%s/self/mountinfo" % proc))
    except OSError:
        return None


def compute_apps(timeout_s: float) -> Dict[str, Any]:
    """`nvidia-smi --query-compute-apps` once: which pid holds which GPU."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return {"ran": False, "apps": [], "error": "nvidia-smi not found"}
    try:
        done = subprocess.run(
            [executable, *NVIDIA_SMI_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"ran": True, "apps": [], "error": "timed out after %g s" % timeout_s}
    stdout = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or stdout.strip()
        return {"ran": True, "apps": [], "error": "%s (exit code %d)" % (message, done.returncode)}
    return {"ran": True, "apps": parse_compute_apps(stdout), "error": None}


# ---------------------------------------------------------------- touching the host: NCCL RAS


class RasTimeout(Exception):
    """The server did not answer in time."""


class RasConnection:
    """One TCP connection to a RAS server: lines out, lines or the whole report back, each read
    bounded by a deadline. `transcript`, when a list, receives (direction, text) pairs."""

    def __init__(self, sock: socket.socket, transcript: Optional[List[Tuple[str, str]]]) -> None:
        self.sock = sock
        self.buffer = b""
        self.transcript = transcript
        self.received = 0

    def send_line(self, line: str) -> None:
        self.sock.sendall((line + "\n").encode("ascii"))
        self._note(">", line)

    def read_line(self, deadline: float) -> Optional[bytes]:
        """The next line without its newline; None when the server closed the connection first."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > RAS_LINE_MAX_BYTES:
                raise ValueError(
                    "no line end in %d bytes: %s" % (len(self.buffer), _excerpt(self.buffer))
                )
            chunk = self._recv(deadline)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        line = line.rstrip(b"\r")
        self._note("<", line.decode("utf-8", "replace"))
        return line

    def read_to_end(self, deadline: float) -> Tuple[bytes, Optional[str]]:
        """Everything until the server closes: (data, None), or (what came, why it stopped)."""
        data, self.buffer = self.buffer, b""
        why = None
        try:
            while True:
                chunk = self._recv(deadline)
                if not chunk:
                    break
                data += chunk
                if len(data) > RAS_REPORT_MAX_BYTES:
                    why = "report longer than %d bytes: cut" % RAS_REPORT_MAX_BYTES
                    break
        except RasTimeout:
            why = "timeout"
        self._note("body", data.decode("utf-8", "replace"))
        return data, why

    def _recv(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RasTimeout()
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout as exc:
            raise RasTimeout() from exc
        self.received += len(chunk)
        return chunk

    def _note(self, direction: str, text: str) -> None:
        if self.transcript is not None:
            self.transcript.append((direction, text))


def render_transcript(transcript: List[Tuple[str, str]]) -> str:
    """A transcript as the golden files write it: `> sent`, `< received line`, then the report."""
    out = []
    for direction, text in transcript:
        out.append(text if direction == "body" else "%s %s\n" % (direction, text))
    return "".join(out)


def ras_query(
    family: int,
    address: Tuple[Any, ...],
    settings: Dict[str, float],
    transcript: Optional[List[Tuple[str, str]]] = None,
) -> Dict[str, Any]:
    """One exchange with a RAS server: handshake, TIMEOUT, SET FORMAT json (text when refused),
    VERBOSE STATUS, the report until the server closes. Never raises for what the server does."""
    started = time.monotonic()
    result: Dict[str, Any] = {
        "address": _address_text(family, address),
        "stage": "connect",
        "answered": False,
        "listening": None,
        "server_protocol": None,
        "format": None,
        "error": None,
        "report": None,
        "bytes": 0,
    }
    sock = socket.socket(family, socket.SOCK_STREAM)
    connection = RasConnection(sock, transcript)
    try:
        sock.settimeout(settings["connect_timeout_s"])
        try:
            sock.connect(address)
        except ConnectionRefusedError:
            result.update(listening=False, error="connection refused: nothing listens there")
            return result
        except socket.timeout:
            result["error"] = "no TCP answer within %g s" % settings["connect_timeout_s"]
            return result
        result["listening"] = True
        _exchange(connection, settings, result)
    except RasTimeout:
        result["error"] = (
            "connected, but no answer to %s within %g s (the process may be stopped or wedged)"
            % (
                result["stage"],
                settings["read_timeout_s"],
            )
        )
    except ValueError as exc:  # what the server said or did, in our words
        result["error"] = str(exc)
    except OSError as exc:
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        sock.close()
        result["bytes"] = connection.received
        result["elapsed_s"] = round(time.monotonic() - started, 3)
    return result


def _exchange(
    connection: RasConnection, settings: Dict[str, float], result: Dict[str, Any]
) -> None:
    result["stage"] = "CLIENT PROTOCOL"
    reply = _ask(connection, "CLIENT PROTOCOL %d" % RAS_PROTOCOL, settings)
    if not reply.upper().startswith(b"SERVER PROTOCOL "):
        raise ValueError("not an NCCL RAS server: it answered %s" % _excerpt(reply))
    result["server_protocol"] = reply.split()[-1].decode("ascii", "replace")
    result["stage"] = "TIMEOUT"
    timeout_s = max(1, int(settings["collective_timeout_s"]))  # 0 would mean "wait forever"
    _ask(connection, "TIMEOUT %d" % timeout_s, settings)  # an ERROR keeps NCCL's default (5 s)
    use_json = False
    if settings.get("json", 1):
        result["stage"] = "SET FORMAT json"
        use_json = _ask(connection, "SET FORMAT json", settings).strip().upper() == b"OK"
    result["format"] = "json" if use_json else "text"
    result["stage"] = "VERBOSE STATUS"
    connection.send_line("VERBOSE STATUS")
    deadline = time.monotonic() + timeout_s + RAS_EXTRA_TIMEOUT_S + settings["read_timeout_s"]
    data, cut = connection.read_to_end(deadline)
    text = data.decode("utf-8", "replace")
    if use_json:
        if cut:
            raise ValueError("%s before the JSON report ended (%d bytes came)" % (cut, len(data)))
        result["report"] = parse_json_report(text)
    else:
        result["report"] = parse_text_report(text)
        if cut or not result["report"]["complete"]:
            result["error"] = "%s: the text report stopped short (%d bytes came)" % (
                cut or "closed",
                len(data),
            )
    result["answered"] = True
    result["stage"] = "done"


def _ask(connection: RasConnection, command: str, settings: Dict[str, float]) -> bytes:
    connection.send_line(command)
    reply = connection.read_line(time.monotonic() + settings["read_timeout_s"])
    if reply is None:
        raise ValueError("the server closed the connection after %s" % command)
    return reply


def _address_text(family: int, address: Tuple[Any, ...]) -> str:
    host, port = address[0], address[1]
    return "[%s]:%d" % (host, port) if family == socket.AF_INET6 else "%s:%d" % (host, port)


def resolve(host: str, port: int, timeout_s: float = 1.0) -> List[Tuple[int, Tuple[Any, ...]]]:
    """(family, address) to try, in order: localhost is 127.0.0.1 then ::1 (NCCL may bind
    either); an IP is itself; a name is resolved in a thread that is given up after timeout_s."""
    if host == "localhost":
        return [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port, 0, 0))]
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return [(family, (host, port) if family == socket.AF_INET else (host, port, 0, 0))]
    found: List[Any] = []

    def lookup() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except OSError:
            pass

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(timeout_s)
    return [
        (info[0], info[4]) for info in list(found) if info[0] in (socket.AF_INET, socket.AF_INET6)
    ]


def query_endpoint(
    endpoint: str,
    listeners: List[Dict[str, Any]],
    settings: Dict[str, float],
    deadline: float,
    transcripts: Optional[List[str]] = None,
) -> Dict[str, Any]:
    """Ask one endpoint until every local listener's pid is in an answer, within the attempts.

    NCCL binds its RAS port with SO_REUSEPORT: every NCCL process of a user on a host listens on
    the same port and the kernel hands each connection to one of them. A stopped one never
    answers and another job's answers name other communicators: each further connection may
    reach another listener, so up to one attempt per listener (plus one) is made."""
    outcome: Dict[str, Any] = {
        "endpoint": endpoint,
        "attempts": [],
        "answered": False,
        "error": None,
    }
    try:
        host, port = parse_endpoint(endpoint)
    except ValueError as exc:
        outcome["error"] = "not an endpoint: %s" % exc
        return outcome
    addresses = resolve(host, port)
    if not addresses:
        outcome["error"] = "could not resolve %s" % host
        return outcome
    # A stopped listener cannot answer: it is not waited for (problems names it).
    wanted = {
        p.get("ns_pid") or p["pid"] for p in listeners if p.get("state") not in ("T", "t", "Z")
    }
    limit = 1 if len(listeners) <= 1 else min(int(settings["attempts"]), 2 * len(listeners) + 1)
    seen: set = set()
    connections = 0
    while connections < limit and time.monotonic() < deadline:
        connections += 1
        attempt = None
        for family, address in addresses:
            transcript: Optional[List[Tuple[str, str]]] = [] if transcripts is not None else None
            attempt = ras_query(family, address, settings, transcript)
            outcome["attempts"].append(attempt)
            if transcripts is not None and transcript:
                transcripts.append(render_transcript(transcript))
            if attempt["listening"] is not False:
                break
        if attempt is None or attempt["listening"] is False:
            break  # nothing listens on any address: another try changes nothing
        if attempt["answered"]:
            outcome["answered"] = True
            seen |= _pids_in(attempt["report"])
        if wanted <= seen and (outcome["answered"] or not wanted):
            break  # every live listener answered, or none is known to wait for
    errors = [a["error"] for a in outcome["attempts"] if a["error"]]
    if not outcome["answered"] and errors:
        outcome["error"] = errors[-1]
    return outcome


def _pids_in(report: Optional[Dict[str, Any]]) -> set:
    """Pids a report names, as ranks or missing ranks (JSON), or in its blocks (text)."""
    pids = set()
    for comm in (report or {}).get("communicators") or []:
        for rank in (comm.get("ranks") or []) + (comm.get("missing_ranks") or []):
            pids.add(rank.get("pid"))
    for block in ((report or {}).get("errors") or []) + ((report or {}).get("warnings") or []):
        pids |= {item.get("pid") for item in block["ranks"] + block["processes"]}
    return pids


# ---------------------------------------------------------------- joining it up


def merge_communicators(outcomes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The JSON reports' communicators, one per hash (the first answer's), with the endpoint and
    the NCCL version that reported it."""
    merged: Dict[str, Dict[str, Any]] = {}
    for outcome in outcomes:
        for attempt in outcome["attempts"]:
            report = attempt.get("report") or {}
            for comm in report.get("communicators") or []:
                key = str(comm.get("hash"))
                if key not in merged:
                    merged[key] = dict(
                        comm, endpoint=outcome["endpoint"], nccl_version=report.get("nccl_version")
                    )
    return list(merged.values())


def join_ranks(
    processes: List[Dict[str, Any]], communicators: List[Dict[str, Any]], addresses: List[str]
) -> None:
    """Each local process gets the ranks RAS says it holds ({comm, rank, cuda_dev}); a rank whose
    host is not one of this host's addresses is another host's (when the addresses are known)."""
    by_pid: Dict[int, Dict[str, Any]] = {}
    for process in processes:
        by_pid[process.get("ns_pid") or process["pid"]] = process
    for comm in communicators:
        for rank in comm.get("ranks") or []:
            if addresses and rank.get("host") not in addresses:
                continue
            holder = by_pid.get(rank.get("pid"))
            if holder is not None:
                holder["ranks"].append(
                    {
                        "comm": comm.get("hash"),
                        "rank": rank.get("rank"),
                        "cuda_dev": rank.get("cuda_dev"),
                    }
                )


def uncovered_processes(
    processes: List[Dict[str, Any]], outcomes: List[Dict[str, Any]]
) -> List[str]:
    """What no RAS answer covers: NCCL processes here that RAS names nowhere, and endpoints that
    accepted a connection but never answered. A text report (NCCL before 2.28.7) names no pid when
    all is well: a complete one covers the processes listening on the endpoint that gave it."""
    named = set()
    text_endpoints = set()
    found = []
    for outcome in outcomes:
        for attempt in outcome["attempts"]:
            named |= _pids_in(attempt.get("report"))
            report = attempt.get("report") or {}
            if report.get("format") == "text" and report.get("complete"):
                text_endpoints.add(outcome["endpoint"])
        if not outcome["answered"] and any(a.get("listening") for a in outcome["attempts"]):
            found.append("RAS at %s: %s" % (outcome["endpoint"], outcome["error"]))
    for process in processes:
        disabled = process["ras_endpoint"] is None
        if not runs_nccl(process) and not (disabled and process.get("gpus")):
            continue
        if (process.get("ns_pid") or process["pid"]) in named:
            continue
        if process["ras_endpoint"] in text_endpoints:
            continue
        why = "RAS disabled (NCCL_RAS_ENABLE=0)" if disabled else "no RAS answer names it"
        found.append("pid %d (%s): %s" % (process["pid"], _short(process["cmdline"]), why))
    return found


def _options(options: Dict[str, Any]) -> Dict[str, float]:
    return {
        "connect_timeout_s": float(options.get("ras_connect_timeout_s", RAS_CONNECT_TIMEOUT_S)),
        "read_timeout_s": float(options.get("ras_read_timeout_s", RAS_READ_TIMEOUT_S)),
        "collective_timeout_s": float(
            options.get("ras_collective_timeout_s", RAS_COLLECTIVE_TIMEOUT_S)
        ),
        "attempts": float(options.get("ras_attempts", RAS_ATTEMPTS)),
        "budget_s": float(options.get("ras_budget_s", RAS_BUDGET_S)),
        "json": float(str(options.get("ras_format", "json")).lower() != "text"),
    }


def _string_list(value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value or []]


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Touch the host; return {"ok": bool, "data": {...}, "error": str | None}.

    Options: ras (default true), ras_endpoints (more "host:port" to ask), ras_format ("json", the
    default, falls back to text where refused; "text" never asks for JSON), ras_connect_timeout_s,
    ras_read_timeout_s, ras_collective_timeout_s, ras_attempts, ras_budget_s, nvidia_smi_timeout_s,
    transcripts (true: keep each RAS exchange as text under ras[].transcripts, for captures)."""
    started = time.monotonic()
    proc = str(options.get("proc", PROC))
    # Under the fleet runner the parent is the runner: it and the probes it forked (some have
    # imported torch, so they map libnccl) are fleet's own, not jobs.
    own_root = os.getppid() if __name__.startswith("fleet_probe_") else None
    scan = Scan(proc, own_root)
    try:
        scan.run()
    except OSError as exc:
        return {"ok": False, "data": {}, "error": "cannot list %s: %s" % (proc, exc)}
    scanned = time.monotonic()
    users: Dict[int, str] = {}
    libraries = Libraries(proc)
    sockets = Listeners(proc)
    processes: List[Dict[str, Any]] = []
    excluded = 0
    for pid in sorted(scan.candidates):
        if scan.is_own(pid):
            excluded += 1
            continue
        process = describe_process(proc, pid, scan.candidates[pid], libraries, users, sockets)
        if process is not None:
            processes.append(process)
    unreadable = describe_unreadable(proc, scan.unreadable, users)
    unreadable["hidepid"] = hidepid(proc)
    gpu_apps: Dict[str, Any] = {"ran": False, "apps": [], "error": None}
    if processes or unreadable["nccl_processes"]:
        asked = time.monotonic()
        gpu_apps = compute_apps(float(options.get("nvidia_smi_timeout_s", NVIDIA_SMI_TIMEOUT_S)))
        gpu_apps["elapsed_s"] = round(time.monotonic() - asked, 3)
        holders: Dict[int, List[Dict[str, Any]]] = {}
        for app in gpu_apps["apps"]:
            holders.setdefault(app["pid"], []).append(
                {"uuid": app["gpu_uuid"], "used_memory_mib": app["used_memory_mib"]}
            )
        for process in processes + unreadable["nccl_processes"]:
            process["gpus"] = holders.get(process["pid"], [])
    addresses = local_addresses(proc)
    described = time.monotonic()

    everyone = processes + unreadable["nccl_processes"]
    outcomes: List[Dict[str, Any]] = []
    if options.get("ras", True):
        settings = _options(options)
        endpoints = [RAS_DEFAULT, *_string_list(options.get("ras_endpoints"))]
        endpoints += sorted({p["ras_endpoint"] for p in processes if p["ras_endpoint"]})
        deadline = time.monotonic() + settings["budget_s"]
        keep = bool(options.get("transcripts"))
        for endpoint in sorted(set(endpoints), key=endpoints.index):
            listeners = [
                p
                for p in everyone
                if p["ras_endpoint"] == endpoint
                and (p["ras_listener"] or (p["listening"] is None and p["nccl_threads"]))
            ]
            transcripts: Optional[List[str]] = [] if keep else None
            outcome = query_endpoint(endpoint, listeners, settings, deadline, transcripts)
            if transcripts is not None:
                outcome["transcripts"] = transcripts
            outcomes.append(outcome)
    communicators = merge_communicators(outcomes)
    join_ranks(everyone, communicators, addresses)
    text_reports = [
        a["report"]
        for o in outcomes
        for a in o["attempts"]
        if a.get("report") and a["report"]["format"] == "text"
    ]
    data = {
        "processes": processes,
        "unreadable": unreadable,
        "excluded_own": excluded,
        "gpu_apps": gpu_apps,
        "ras": outcomes,
        "communicators": communicators,
        "problems": problems(
            everyone, communicators, text_reports, uncovered_processes(everyone, outcomes)
        ),
        "local_addresses": addresses,
        "scan": {
            "proc_entries": scan.entries,
            "maps_bytes": scan.maps_bytes,
            "library_bytes_read": libraries.bytes_read,
            "library_read_s": round(libraries.seconds, 3),
            "scan_s": round(scanned - started, 3),
            "describe_s": round(described - scanned, 3),
            "ras_s": round(time.monotonic() - described, 3),
            "total_s": round(time.monotonic() - started, 3),
        },
    }
    return {"ok": True, "data": data, "error": None}


if __name__ == "__main__":
    del sys.path[0]  # like every probe: never import a module from probes/ by accident
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
