"""Reading /proc for the live probe: which processes mapped a libnccl, what each one is (status,
command line, allowed environment, thread names, listening sockets), and this host's addresses.

Not a probe (the leading underscore): probes/live.py imports it and lists it in its `SHIPS`; the
bundle carries it and the host runner makes it importable by name. Stdlib only, Python 3.8.
Secrets stay home: only allow-listed environment variables are shown, secret-named ones masked.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

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
# The same names the host runner masks (probes/runner/_host_runner.py SECRET_NAME): a probe shares no code.
SECRET_NAME = re.compile(r"(?i)(TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)")
SECRET_OPTION = re.compile(
    r"(?i)^--?[\w.-]*(token|secret|passw|api[-_]?key|access[-_]?key|private[-_]?key|credential)"
)


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


def thread_kinds(names: Iterable[str]) -> List[str]:
    """The threads that show NCCL at work, numbers dropped: torch's ProcessGroupNCCL names its
    own ("pt_nccl_watchdg", "pt_nccl_heartbt"); NCCL names its threads ("NCCL RAS", "NCCL
    Service  3") only with NCCL_SET_THREAD_NAME=1. Thread names are readable by every user."""
    kinds = set()
    for name in names:
        if name.startswith(THREAD_PREFIXES):
            kinds.add(re.sub(r"[\s\d]+$", "", name).strip())
    return sorted(kinds)


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
