"""Which libnccl (libcudart, libcuda) a process mapped: the ELF build id and NCCL's own version
string, read from the very file mapped (/proc/PID/map_files), a few KB of headers and .rodata.

Not a probe (the leading underscore): probes/live.py imports it and lists it in its `SHIPS`.
Stdlib only, Python 3.8.
"""

from __future__ import annotations

import os
import re
import struct
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

PROC = "/proc"

VERSION_IN_NAME = re.compile(r"\.so\.(\d+\.\d+(?:\.\d+)*)$")
# NCCL's VERSION_STRING: "NCCL version 2.28.9+cuda13.0".
NCCL_VERSION = re.compile(rb"NCCL version (\d+\.\d+\.\d+)(\+cuda[\d.]+)?")
# Reading .rodata alone: on the H200, libnccl 2.28.9 (218 MB) plus libcudart and libcuda cost
# 225 KB of reads and 2 ms in all.
RODATA_MAX_BYTES = 64 * 1024 * 1024
FALLBACK_SCAN_MAX_BYTES = 512 * 1024 * 1024  # no section table: the whole file, bounded
FALLBACK_SCAN_CHUNK = 8 * 1024 * 1024
LIBRARY_READ_BUDGET_S = 5.0  # all library reads of one run together


def version_from_name(path: str) -> Optional[str]:
    """libcuda.so.580.159.03 -> "580.159.03"; libnccl.so.2 or libcudart.so.13 say nothing."""
    match = VERSION_IN_NAME.search(os.path.basename(path))
    return match.group(1) if match else None


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
