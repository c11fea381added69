"""NCCL's network plugins: the file NCCL's dlopen() would load for NCCL_NET_PLUGIN (LD_LIBRARY_PATH,
the ld.so cache, glibc's folders), every plugin installed elsewhere (vendor folders, the Python
environment's nvidia packages), and what each is (aws-ofi-nccl, gIB, ...) with its version.

Not a probe (the leading underscore): shipped with the net probe (its `SHIPS`), stdlib only,
Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import _ldconfig
from _net_tree import Tree

DEFAULT_PLUGIN = "libnccl-net.so"
PLUGIN_FILE = re.compile(r"^libnccl-net[^/]*\.so(?:\.[0-9.]+)?$")
# Where network plugins are installed without being on the library path by default: AWS's
# aws-ofi-nccl, Google's gIB and GPUDirect-TCPX/TCPXO, HPC-X's nccl-rdma-sharp-plugins.
KNOWN_PLUGIN_DIRS = (
    "/opt/amazon/ofi-nccl/lib",
    "/opt/amazon/ofi-nccl/lib64",
    "/opt/aws-ofi-nccl/lib",
    "/usr/local/gib/lib64",
    "/usr/local/tcpx/lib64",
    "/usr/local/nvidia/lib64",
    "/opt/hpcx/nccl_rdma_sharp_plugin/lib",
)
# glibc's default library directories (after LD_LIBRARY_PATH and the ld.so cache).
DEFAULT_LIB_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")
# What a plugin is, from markers in its file (or its path), and the names its net calls itself.
PLUGIN_KINDS = (
    ("aws-ofi-nccl", (b"aws-ofi-nccl", b"NET/OFI"), ("aws-ofi", "ofi-nccl")),
    ("gIB", (b"NET/gIB", b"gIB"), ("/gib/",)),
    ("nccl-rdma-sharp-plugins", (b"nccl-rdma-sharp-plugins", b"NET/UCX", b"SHARP"), ("sharp",)),
    ("GPUDirect-TCPXO", (b"FasTrak",), ("tcpxo",)),
    ("GPUDirect-TCPX", (b"GPUDirectTCPX",), ("tcpx",)),
)
PLUGIN_NET_NAMES = {
    "aws-ofi-nccl": ("AWS Libfabric", "Libfabric", "OFI"),
    "gIB": ("gIB",),
    "GPUDirect-TCPX": ("GPUDirectTCPX",),
    "GPUDirect-TCPXO": ("FasTrak",),
}
PLUGIN_VERSIONS = (
    re.compile(rb"aws-ofi-nccl[ /v]*(\d+\.\d+\.\d+(?:-[A-Za-z0-9.]+)?)"),
    re.compile(rb"nccl-rdma-sharp-plugins[ /v]*(\d+\.\d+(?:\.\d+)?)"),
)
VERSION_IN_NAME = re.compile(r"\.so\.(\d+\.\d+(?:\.\d+)*)$")
PLUGIN_SCAN_MAX_BYTES = 64 * 1024 * 1024
PLUGIN_SCAN_CHUNK = 4 * 1024 * 1024
PLUGIN_SCAN_BUDGET_S = 2.0  # every plugin file together


def parse_ldconfig_plugins(text: str) -> List[Tuple[str, str]]:
    """`ldconfig -p` -> (soname, path) of every libnccl-net* entry, in listed order."""
    found: List[Tuple[str, str]] = _ldconfig.entries_named(text, PLUGIN_FILE)
    return found


def plugin_kind(path: str, head: bytes) -> Optional[str]:
    """What a network plugin is, from markers in its bytes (or, failing that, its path)."""
    for kind, markers, _ in PLUGIN_KINDS:
        if any(marker in head for marker in markers):
            return kind
    lowered = path.lower()
    for kind, _, path_markers in PLUGIN_KINDS:
        if any(marker in lowered for marker in path_markers):
            return kind
    return None


def plugin_version(path: str, head: bytes) -> Optional[str]:
    for pattern in PLUGIN_VERSIONS:
        match = pattern.search(head)
        if match:
            return match.group(1).decode("ascii", "replace")
    in_name = VERSION_IN_NAME.search(os.path.basename(path))
    return in_name.group(1) if in_name else None


class PluginSearch:
    """Where NCCL's dlopen() would look for a network plugin, and what is installed elsewhere:
    LD_LIBRARY_PATH, the ld.so cache (ldconfig -p), glibc's default folders, the places vendors
    install plugins, and the Python environment's nvidia packages."""

    def __init__(
        self,
        tree: Tree,
        environ: Mapping[str, str],
        ldconfig_text: Optional[str],
        python_paths: Sequence[str],
    ) -> None:
        self.tree = tree
        self.library_path = [p for p in environ.get("LD_LIBRARY_PATH", "").split(":") if p]
        self.ldconfig = parse_ldconfig_plugins(ldconfig_text or "")
        self.ldconfig_ran = ldconfig_text is not None
        self.python_paths = list(python_paths)
        self.deadline = time.monotonic() + PLUGIN_SCAN_BUDGET_S

    def dlopen(self, name: str) -> Optional[Tuple[str, str]]:
        """(path, found by) for the file dlopen(name) would load, or None."""
        if "/" in name:
            return (name, "path") if self._is_file(name) else None
        for folder in self.library_path:
            path = os.path.join(folder, name)
            if self._is_file(path):
                return path, "LD_LIBRARY_PATH"
        for soname, path in self.ldconfig:
            if soname == name and self._is_file(path):
                return path, "ldconfig"
        for folder in DEFAULT_LIB_DIRS:
            path = os.path.join(folder, name)
            if self._is_file(path):
                return path, "default folders"
        return None

    def installed(self) -> List[Tuple[str, str]]:
        """(path, where) of every libnccl-net* file in the places searched, the first of each."""
        found: List[Tuple[str, str]] = []
        for folder in self.library_path:
            found += [(p, "LD_LIBRARY_PATH") for p in self._plugins_in(folder)]
        found += [(path, "ldconfig") for _, path in self.ldconfig]
        for folder in DEFAULT_LIB_DIRS + KNOWN_PLUGIN_DIRS:
            found += [(p, "installed") for p in self._plugins_in(folder)]
        for entry in self.python_paths:
            for package in self.tree.listdir(os.path.join(entry, "nvidia")) or []:
                folder = os.path.join(entry, "nvidia", package, "lib")
                found += [(p, "python:nvidia/" + package) for p in self._plugins_in(folder)]
        unique: List[Tuple[str, str]] = []
        seen = set()
        for path, where in found:
            real = os.path.realpath(self.tree.path(path))
            if real not in seen:
                seen.add(real)
                unique.append((path, where))
        return unique

    def describe(self, path: str, where: str) -> Dict[str, Any]:
        real = os.path.realpath(self.tree.path(path))
        head = self._scan(real)
        relative_real = "/" + os.path.relpath(real, os.path.realpath(self.tree.root))
        return {
            "path": path,
            "real_path": relative_real if self.tree.root != "/" else real,
            "found_by": where,
            "kind": plugin_kind(real, head),
            "version": plugin_version(real, head),
        }

    def _plugins_in(self, folder: str) -> List[str]:
        names = self.tree.listdir(folder) or []
        return [os.path.join(folder, n) for n in names if PLUGIN_FILE.match(n)]

    def _is_file(self, path: str) -> bool:
        return os.path.isfile(self.tree.path(path))

    def _scan(self, real_path: str) -> bytes:
        """The markers and version strings found in the file, within the scan's bounds (a
        plugin is a few MB); b"" when out of time or unreadable."""
        found = b""
        tail = b""
        read = 0
        try:
            with open(real_path, "rb") as library:
                while read < PLUGIN_SCAN_MAX_BYTES and time.monotonic() < self.deadline:
                    chunk = library.read(PLUGIN_SCAN_CHUNK)
                    if not chunk:
                        break
                    read += len(chunk)
                    window = tail + chunk
                    for _, markers, _ in PLUGIN_KINDS:
                        found += b"".join(m for m in markers if m in window and m not in found)
                    for pattern in PLUGIN_VERSIONS:
                        match = pattern.search(window)
                        if match and match.group(0) not in found:
                            found += b" " + match.group(0)
                    tail = chunk[-128:]
        except OSError:
            return b""
        return found


def plugin_names_tried(setting: Optional[str]) -> List[str]:
    """The library names NCCL tries for NCCL_NET_PLUGIN (src/plugin/plugin_open.cc): each comma
    separated name as given, then libnccl-net-NAME.so where NAME is neither a path nor a full
    lib*.so name; unset: libnccl-net.so; "none": nothing."""
    if setting is None:
        return [DEFAULT_PLUGIN]
    if setting.strip().lower() == "none":
        return []
    names = []
    for name in (n.strip() for n in setting.split(",")):
        if not name:
            continue
        names.append(name)
        if "/" not in name and not (name.startswith("lib") and name.endswith(".so")):
            names.append("libnccl-net-%s.so" % name)
    return names


def read_plugins(search: PluginSearch, setting: Optional[str]) -> Dict[str, Any]:
    tried = plugin_names_tried(setting)
    loads = None
    for name in tried:
        hit = search.dlopen(name)
        if hit is not None:
            loads = dict(search.describe(*hit), name=name)
            break
    found = [search.describe(path, where) for path, where in search.installed()]
    return {
        "setting": setting,
        "tries": tried,
        "loads": loads,
        "in_use": plugin_in_use(loads, setting),
        "found": found,
        "ldconfig_read": search.ldconfig_ran,
    }


def plugin_in_use(loads: Optional[Mapping[str, Any]], setting: Optional[str]) -> str:
    """One line, equal on hosts that would load the same plugin file and version."""
    if loads is None:
        if setting is not None and setting.strip().lower() == "none":
            return "none (NCCL_NET_PLUGIN=none): NCCL's internal IB and Socket transports"
        return "none: NCCL's internal IB and Socket transports"
    return "%s %s at %s" % (
        loads.get("kind") or "unknown plugin",
        loads.get("version") or "(version not found)",
        loads.get("real_path") or loads.get("path"),
    )
