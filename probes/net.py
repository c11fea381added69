"""Networks: RDMA devices and ports, NICs, kernel modules, GPUDirect RDMA, NCCL's net plugins and settings.

Read-only and root-free: it reads sysfs (/sys/class/infiniband, /sys/class/net, /sys/module), /proc
(modules, the kernel release, the NVIDIA driver's version) and the NCCL settings of this session
(environment, ~/.nccl.conf, /etc/nccl.conf); it lists /dev/infiniband but never opens a device.
Every read goes through one Tree(root): production reads "/", the tests point it at sysfs trees.

Outcome: ok is True whenever the host could be read, also with no RDMA device at all (a host
without RDMA says so in `rdma.summary`: a fact, not a failure). A section that could not be read
holds null where rules read it, so such a host is `unknown`, never a pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

TIMEOUT_S = 30
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py).
# GUIDs, GIDs (they embed MAC and IP addresses), LIDs and PCI bus ids are per host: identity. The
# summaries and views derived from `rdma.devices` for rules are volatile (the devices' own fields
# are compared, once). What the machine is (devices, ports, link layers, rates, NICs) is hardware.
FACTS = {
    "identity": [
        "rdma.devices.*.node_guid",
        "rdma.devices.*.sys_image_guid",
        "rdma.devices.*.pci_bus_id",
        "rdma.devices.*.ports.*.gids",
        "rdma.devices.*.ports.*.gids.*",
        "rdma.devices.*.ports.*.lid",
        "rdma.devices.*.ports.*.sm_lid",
        "netdevs.*.pci_bus_id",
        "gid_index.ports.*.gid",
    ],
    "volatile": [
        "rdma.summary",
        "rdma.inactive_ports",
        "rdma.rates",
        "rdma.firmware",
        "rdma.roce_ports",
        "virtual_netdevs",
        "nccl_plugins.found",
        "nccl_plugins.found[*].*",
        "nccl_plugins.loads",  # compared once, as nccl_plugins.in_use
        "nccl_plugins.loads.*",
        "nccl_settings.*.note",
        "settings_problems",
        "gid_index.problems",
        "unreadable",
        "timings_s",
        "timings_s.*",
    ],
    "sets": ["rdma.hcas", "dev_infiniband"],
    # ("*" spans dots: everything under each device and interface)
    "hardware": [
        "rdma.hcas",
        "rdma.port_count",
        "rdma.active_ports",
        "rdma.devices",
        "rdma.devices.*",
        "netdevs",
        "netdevs.*",
        "dev_infiniband",
    ],
}

SYS_INFINIBAND = "sys/class/infiniband"
SYS_NET = "sys/class/net"
SYS_MODULE = "sys/module"
DEV_INFINIBAND = "dev/infiniband"
PROC_MODULES = "proc/modules"
PROC_OSRELEASE = "proc/sys/kernel/osrelease"
PROC_NVIDIA_VERSION = "proc/driver/nvidia/version"
SYSTEM_CONF = "/etc/nccl.conf"
USER_CONF = "~/.nccl.conf"

# Kernel modules that decide what the RDMA stack can do: the Mellanox/NVIDIA NIC driver and its
# verbs provider, the RDMA core, IPoIB, AWS EFA, and the two ways GPU memory is registered with a
# NIC (nvidia_peermem in the NVIDIA driver; nv_peer_mem, Mellanox's older out-of-tree module).
MODULES = (
    "mlx5_core",
    "mlx5_ib",
    "ib_core",
    "ib_uverbs",
    "rdma_cm",
    "ib_ipoib",
    "efa",
    "nvidia",
    "nvidia_peermem",
    "nv_peer_mem",
)
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
# dma-buf registration of GPU memory (ibv_reg_dmabuf_mr): Linux 5.12+ with the open NVIDIA module.
DMABUF_KERNEL = (5, 12)

# The NCCL settings that choose or shape the network, in the order they are reported.
NET_SETTINGS = (
    "NCCL_NET",
    "NCCL_NET_PLUGIN",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_IB_ADDR_FAMILY",
    "NCCL_IB_ADDR_RANGE",
    "NCCL_IB_DISABLE",
    "NCCL_IB_TC",
    "NCCL_IB_SL",
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT",
    "NCCL_IB_PCI_RELAXED_ORDERING",
    "NCCL_IB_MERGE_NICS",
    "NCCL_IB_SPLIT_DATA_ON_QPS",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_IB_ADAPTIVE_ROUTING",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_DMABUF_ENABLE",
    "NCCL_CROSS_NIC",
    "NCCL_COLLNET_ENABLE",
    "NCCL_IGNORE_NET_MISMATCH",
    "NCCL_SOCKET_FAMILY",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
)
# NCCL's own transports, by the names NCCL_NET selects them with (compared without case).
INTERNAL_NETS = ("IB", "Socket")
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
LDCONFIG_TIMEOUT_S = 5.0
LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")

# sysfs text -> values
PORT_STATE = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")  # "4: ACTIVE", "5: LinkUp"
RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")  # "400 Gb/sec (4X NDR)"
ZERO_GID = re.compile(r"^[0:]+$")
ARPHRD = {1: "ethernet", 32: "infiniband", 772: "loopback"}
IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"
PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
EXCERPT = 120


# ---------------------------------------------------------------- the one reader of the host


class Tree:
    """Every read of the host goes through here: paths are relative to `root` ("/" in production,
    a fixture tree in the tests). A file that is absent, or that the kernel refuses to read
    (EINVAL: a GID slot with no entry, the speed of a link that is down), reads as None; one this
    user may not read is None too, and its path lands in `unreadable`."""

    def __init__(self, root: str = "/") -> None:
        self.root = root
        self.unreadable: List[str] = []

    def path(self, relative: str) -> str:
        return os.path.join(self.root, relative.lstrip("/"))

    def read(self, relative: str) -> Optional[str]:
        try:
            with open(self.path(relative), "rb") as handle:
                return handle.read(65536).decode("utf-8", "replace").strip()
        except PermissionError:
            self.unreadable.append("/" + relative.lstrip("/"))
        except (OSError, ValueError):
            pass
        return None

    def listdir(self, relative: str) -> Optional[List[str]]:
        """Sorted names, or None when the folder is absent or not readable."""
        try:
            return sorted(os.listdir(self.path(relative)))
        except PermissionError:
            self.unreadable.append("/" + relative.lstrip("/"))
        except OSError:
            pass
        return None

    def exists(self, relative: str) -> bool:
        return os.path.lexists(self.path(relative))

    def link_name(self, relative: str) -> Optional[str]:
        """The last part of a symlink's target: a driver's or a device's name."""
        try:
            return os.path.basename(os.readlink(self.path(relative)).rstrip("/"))
        except OSError:
            return None

    def pci_address(self, relative: str) -> Optional[str]:
        """The PCI bus id of the device at `relative` (a `device` symlink): the resolved path's
        last part, or the nearest PCI device above it (a virtio NIC sits under its PCI function)."""
        if not self.exists(relative):
            return None
        path = os.path.realpath(self.path(relative))
        for _ in range(3):
            if PCI_ADDRESS.match(os.path.basename(path)):
                return os.path.basename(path)
            path = os.path.dirname(path)
        return None

    def is_dir(self, relative: str) -> bool:
        return os.path.isdir(self.path(relative))


# ---------------------------------------------------------------- pure parsers


def parse_port_state(text: Optional[str]) -> Optional[str]:
    """sysfs `state` / `phys_state` ("4: ACTIVE", "5: LinkUp") -> "ACTIVE", "LinkUp"."""
    if text is None:
        return None
    match = PORT_STATE.match(text)
    return match.group(2) if match else (text.strip() or None)


def parse_rate_gbps(text: Optional[str]) -> Optional[float]:
    """sysfs `rate` ("400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)") -> 400.0, 2.5."""
    match = RATE.match(text or "")
    return float(match.group(1)) if match else None


def parse_gid_type(text: Optional[str]) -> Optional[str]:
    """`gid_attrs/types/N` -> "RoCE v2", "RoCE v1" or "IB" (the kernel writes "IB/RoCE v1" for
    both IB and RoCE v1 GIDs: the port's link layer tells them apart)."""
    if not text:
        return None
    lowered = text.strip().lower()
    if "v2" in lowered:
        return "RoCE v2"
    if "v1" in lowered or lowered == "ib":
        return "RoCE v1"
    return text.strip()


def gid_family(gid: str) -> str:
    """A GID's address family: ipv4 (IPv4-mapped, ::ffff:a.b.c.d), ipv6-link-local (fe80::) or ipv6."""
    lowered = gid.lower()
    if lowered.startswith(IPV4_MAPPED):
        return "ipv4"
    if lowered.startswith("fe80:"):
        return "ipv6-link-local"
    return "ipv6"


def ipv4_of(gid: str) -> Optional[str]:
    """The IPv4 address inside an IPv4-mapped GID, else None."""
    if gid_family(gid) != "ipv4":
        return None
    hexdigits = gid.lower()[len(IPV4_MAPPED) :].replace(":", "")
    try:
        return ".".join(str(int(hexdigits[i : i + 2], 16)) for i in range(0, 8, 2))
    except ValueError:
        return None


def parse_proc_modules(text: str) -> Dict[str, str]:
    """/proc/modules -> {module: state} ("Live", "Loading", "Unloading")."""
    found: Dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts:
            found[parts[0]] = parts[4] if len(parts) > 4 else "Live"
    return found


def parse_kernel_release(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """The kernel release's major and minor: 6.8.0-1015-nvidia -> (6, 8)."""
    match = re.match(r"^\s*(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_nvidia_flavour(text: Optional[str]) -> Optional[str]:
    """/proc/driver/nvidia/version -> "open" or "proprietary" (None: no NVIDIA driver loaded)."""
    if not text:
        return None
    first = text.splitlines()[0]
    return "open" if "Open Kernel Module" in first else "proprietary"


def parse_nccl_conf(text: str) -> Dict[str, str]:
    """KEY=VALUE lines as NCCL reads them ('#' lines and lines without '=' skipped)."""
    settings: Dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key.strip():
            settings[key.strip()] = value.strip()
    return settings


def parse_ldconfig_plugins(text: str) -> List[Tuple[str, str]]:
    """`ldconfig -p` -> (soname, path) of every libnccl-net* entry, in listed order."""
    found = []
    for line in text.splitlines():
        match = LDCONFIG_LINE.match(line)
        if match and PLUGIN_FILE.match(match.group(1)):
            found.append((match.group(1), match.group(3)))
    return found


def parse_name_list(value: str) -> Dict[str, Any]:
    """NCCL_IB_HCA / NCCL_SOCKET_IFNAME as NCCL parses them: a leading '^' excludes, a leading
    '=' (after any '^') matches names exactly instead of as prefixes; entries are comma
    separated, each `name` or `name:port`."""
    text = value.strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    entries = []
    for raw in text.split(","):
        raw = raw.strip()
        if not raw:
            continue
        name, _, port = raw.partition(":")
        entries.append({"name": name, "port": int(port) if port.isdigit() else None})
    return {"exclude": exclude, "exact": exact, "entries": entries}


def name_matches(name: str, wanted: str, exact: bool) -> bool:
    return name == wanted if exact else name.startswith(wanted)


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


# ---------------------------------------------------------------- RDMA devices


def read_port(tree: Tree, base: str, link_layer_hint: Optional[str] = None) -> Dict[str, Any]:
    """One port of an RDMA device: /sys/class/infiniband/DEV/ports/N."""
    link_layer = tree.read(base + "/link_layer")
    rate = tree.read(base + "/rate")
    port: Dict[str, Any] = {
        "state": parse_port_state(tree.read(base + "/state")),
        "phys_state": parse_port_state(tree.read(base + "/phys_state")),
        "rate": rate,
        "rate_gbps": parse_rate_gbps(rate),
        "link_layer": link_layer or link_layer_hint,
        "lid": tree.read(base + "/lid"),
        "sm_lid": tree.read(base + "/sm_lid"),
    }
    port["gids"] = read_gids(tree, base, port["link_layer"])
    port["pkeys"] = read_pkeys(tree, base)
    port["netdevs"] = sorted({g["netdev"] for g in (port["gids"] or {}).values() if g["netdev"]})
    return port


def read_gids(tree: Tree, base: str, link_layer: Optional[str]) -> Optional[Dict[str, Any]]:
    """The non-empty GID table entries: {index: {gid, type, netdev}}; None when unreadable."""
    names = tree.listdir(base + "/gids")
    if names is None:
        return None
    gids: Dict[str, Any] = {}
    for name in sorted(names, key=lambda n: int(n) if n.isdigit() else -1):
        gid = tree.read("%s/gids/%s" % (base, name))
        if not gid or ZERO_GID.match(gid):
            continue
        kind = parse_gid_type(tree.read("%s/gid_attrs/types/%s" % (base, name)))
        if kind == "RoCE v1" and (link_layer or "").lower() == "infiniband":
            kind = "IB"
        gids[name] = {
            "gid": gid,
            "type": kind,
            "netdev": tree.read("%s/gid_attrs/ndevs/%s" % (base, name)),
        }
    return gids


def read_pkeys(tree: Tree, base: str) -> Optional[List[str]]:
    """The P_Key table's non-zero entries ("0xffff" is the default, full-membership key)."""
    names = tree.listdir(base + "/pkeys")
    if names is None:
        return None
    keys = []
    for name in sorted(names, key=lambda n: int(n) if n.isdigit() else -1):
        value = tree.read("%s/pkeys/%s" % (base, name))
        if value and value.lower() not in ("0x0000", "0x0", "0"):
            keys.append(value.lower())
    return keys


def read_rdma_device(tree: Tree, name: str) -> Dict[str, Any]:
    base = "%s/%s" % (SYS_INFINIBAND, name)
    device: Dict[str, Any] = {
        "board_id": tree.read(base + "/board_id"),
        "fw_ver": tree.read(base + "/fw_ver"),
        "hca_type": tree.read(base + "/hca_type"),
        "node_type": parse_port_state(tree.read(base + "/node_type")),
        "node_guid": tree.read(base + "/node_guid"),
        "sys_image_guid": tree.read(base + "/sys_image_guid"),
        "pci_bus_id": tree.pci_address(base + "/device"),
        "numa_node": _int(tree.read(base + "/device/numa_node")),
        "vendor_id": tree.read(base + "/device/vendor"),
        "driver": tree.link_name(base + "/device/driver"),
    }
    if device["numa_node"] is not None and device["numa_node"] < 0:
        device["numa_node"] = None  # -1: the platform does not say
    ports: Dict[str, Any] = {}
    for port in tree.listdir(base + "/ports") or []:
        ports[port] = read_port(tree, "%s/ports/%s" % (base, port))
    _add_ipoib_netdevs(tree, base, ports)
    device["ports"] = ports
    return device


def _add_ipoib_netdevs(tree: Tree, base: str, ports: Dict[str, Any]) -> None:
    """IB ports have no GID netdevs: their IPoIB (or, for RoCE without GIDs yet, Ethernet)
    netdevs sit under the PCI device, tied to a port by `dev_port` (0-based), as ibdev2netdev
    reads them."""
    for netdev in tree.listdir(base + "/device/net") or []:
        dev_port = _int(tree.read("%s/device/net/%s/dev_port" % (base, netdev)))
        port_name = str((dev_port or 0) + 1)
        if port_name not in ports and len(ports) == 1:
            port_name = next(iter(ports))
        port = ports.get(port_name)
        if port is not None and netdev not in port["netdevs"]:
            port["netdevs"] = sorted(port["netdevs"] + [netdev])


def read_rdma(tree: Tree) -> Dict[str, Any]:
    """Every RDMA device under /sys/class/infiniband, and the views of them that rules read."""
    names = tree.listdir(SYS_INFINIBAND)
    dev_names = tree.listdir(DEV_INFINIBAND)
    if names is None:
        readable = not tree.exists(SYS_INFINIBAND)  # absent: no RDMA stack; present: refused
        devices: Optional[Dict[str, Any]] = {} if readable else None
    else:
        devices = {name: read_rdma_device(tree, name) for name in names}
    rdma = rdma_views(devices)
    rdma["summary"] = rdma_summary(devices, tree.exists(SYS_INFINIBAND), dev_names)
    return {"rdma": rdma, "dev_infiniband": dev_names}


def port_label(device: str, port: str) -> str:
    return "%s/%s" % (device, port)


def natural_key(name: str) -> List[Any]:
    """mlx5_2 before mlx5_10."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name)]


def natural_sorted(names: Iterable[str]) -> List[str]:
    return sorted(names, key=natural_key)


def rdma_views(devices: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """What rules read, derived from the devices: None everywhere when they could not be read."""
    if devices is None:
        return dict.fromkeys(
            (
                "devices",
                "hcas",
                "port_count",
                "active_ports",
                "inactive_ports",
                "rates",
                "firmware",
                "roce_ports",
            )
        )
    ports = [
        (port_label(name, number), port)
        for name, device in sorted(devices.items(), key=lambda item: natural_key(item[0]))
        for number, port in sorted(device["ports"].items(), key=lambda item: natural_key(item[0]))
    ]
    states = [port["state"] for _, port in ports]
    rates = {label: port["rate"] for label, port in ports if port["state"] == "ACTIVE"}
    firmware = {name: devices[name]["fw_ver"] for name in natural_sorted(devices)}
    return {
        "devices": devices,
        "hcas": natural_sorted(devices),
        "port_count": len(ports),
        "active_ports": None if None in states else states.count("ACTIVE"),
        "inactive_ports": [
            "%s: %s (%s)" % (label, port["state"] or "state unreadable", port["phys_state"])
            for label, port in ports
            if port["state"] != "ACTIVE"
        ],
        # null where one is unreadable: a rule reading them is then unknown, never a pass
        "rates": None if None in rates.values() else rates,
        "firmware": None if None in firmware.values() else firmware,
        "roce_ports": [
            label for label, port in ports if (port["link_layer"] or "").lower() == "ethernet"
        ],
    }


def rdma_summary(
    devices: Optional[Dict[str, Any]], class_exists: bool, dev_names: Optional[List[str]]
) -> str:
    dev_text = _dev_infiniband_text(dev_names)
    if devices is None:
        return "RDMA devices not readable: /sys/class/infiniband exists but may not be listed"
    if not devices:
        where = (
            "/sys/class/infiniband is empty"
            if class_exists
            else "/sys/class/infiniband does not exist"
        )
        return "no RDMA devices: %s; %s" % (where, dev_text)
    ports = [p for d in devices.values() for p in d["ports"].values()]
    active = sum(1 for p in ports if p["state"] == "ACTIVE")
    layers = sorted({p["link_layer"] or "link layer unreadable" for p in ports})
    return "%d RDMA device(s) (%s), %d of %d port(s) active, link layer %s" % (
        len(devices),
        ", ".join(natural_sorted(devices)),
        active,
        len(ports),
        " + ".join(layers),
    )


def _dev_infiniband_text(dev_names: Optional[List[str]]) -> str:
    if dev_names is None:
        return "/dev/infiniband does not exist"
    if not dev_names:
        return "/dev/infiniband is empty"
    return "/dev/infiniband holds %s" % ", ".join(dev_names)


# ---------------------------------------------------------------- network interfaces


def read_netdevs(tree: Tree) -> Dict[str, Any]:
    """Interfaces backed by a device (PCI, virtio, ...) with their link facts; the virtual ones
    (bridges, veths, bonds' software side, lo) by name only: containers make them come and go."""
    names = tree.listdir(SYS_NET)
    if names is None:
        return {"netdevs": None, "virtual_netdevs": None}
    netdevs: Dict[str, Any] = {}
    virtual = []
    for name in names:
        base = "%s/%s" % (SYS_NET, name)
        if not tree.exists(base + "/device"):
            virtual.append(name)
            continue
        netdevs[name] = read_netdev(tree, base)
    return {"netdevs": netdevs, "virtual_netdevs": virtual}


def read_netdev(tree: Tree, base: str) -> Dict[str, Any]:
    arphrd = _int(tree.read(base + "/type"))
    speed = _int(tree.read(base + "/speed"))
    numa = _int(tree.read(base + "/device/numa_node"))
    if numa is None:  # a virtio NIC: its PCI function, one up, has the NUMA node
        numa = _int(tree.read(base + "/device/../numa_node"))
    return {
        "kind": ARPHRD.get(arphrd or -1, "type %s" % arphrd if arphrd is not None else None),
        "operstate": tree.read(base + "/operstate"),
        "carrier": _int(tree.read(base + "/carrier")),
        "speed_mbps": speed if speed is not None and speed > 0 else None,
        "mtu": _int(tree.read(base + "/mtu")),
        "driver": tree.link_name(base + "/device/driver"),
        "pci_bus_id": tree.pci_address(base + "/device"),
        "numa_node": numa if numa is not None and numa >= 0 else None,
    }


# ---------------------------------------------------------------- kernel modules, GPUDirect


def read_modules(tree: Tree) -> Dict[str, Any]:
    """The modules that matter, loaded or not, from /proc/modules; where /proc/modules cannot be
    read, /sys/module/NAME (present for loaded and built-in modules)."""
    text = tree.read(PROC_MODULES)
    loaded: Optional[Dict[str, str]] = parse_proc_modules(text) if text is not None else None
    source = "/proc/modules"
    if loaded is None and tree.is_dir(SYS_MODULE):
        loaded = {name: "Live" for name in MODULES if tree.is_dir(SYS_MODULE + "/" + name)}
        source = "/sys/module"
    modules: Dict[str, Any] = {}
    for name in MODULES:
        is_loaded = None if loaded is None else name in loaded
        modules[name] = {
            "loaded": is_loaded,
            "version": tree.read("%s/%s/version" % (SYS_MODULE, name)) if is_loaded else None,
        }
    return {"modules": modules, "modules_source": source if loaded is not None else None}


def gpudirect_rdma(
    modules: Mapping[str, Any],
    has_rdma: Optional[bool],
    kernel: Optional[Tuple[int, int]],
    nvidia_flavour: Optional[str],
) -> Dict[str, Any]:
    """Whether a NIC here can read and write GPU memory directly: through a peer-memory module
    (nvidia_peermem, or the older nv_peer_mem) or through dma-buf (Linux 5.12+ and the open NVIDIA
    kernel module). None where it cannot be told (modules unreadable and no dma-buf)."""
    peermem = [name for name in PEERMEM_MODULES if modules.get(name, {}).get("loaded")]
    peermem_known = all(modules.get(name, {}).get("loaded") is not None for name in PEERMEM_MODULES)
    dma_buf: Optional[bool] = None
    if nvidia_flavour is None:
        dma_buf = False
    elif kernel is not None:
        dma_buf = kernel >= DMABUF_KERNEL and nvidia_flavour == "open"
    result: Dict[str, Any] = {
        "possible": None,
        "via": None,
        "peermem_loaded": peermem[0] if peermem else (False if peermem_known else None),
        "dma_buf": dma_buf,
        "why": "",
    }
    kernel_text = "%d.%d" % kernel if kernel else "unknown"
    if has_rdma is None:
        result["why"] = "the RDMA devices could not be read"
    elif not has_rdma:
        result.update(possible=False, why="no RDMA device")
    elif nvidia_flavour is None:
        result.update(possible=False, why="no NVIDIA kernel module loaded")
    elif peermem:
        result.update(possible=True, via=peermem[0], why="%s is loaded" % peermem[0])
    elif dma_buf:
        result.update(
            possible=True,
            via="dma-buf",
            why="Linux %s and the open NVIDIA kernel module: dma-buf" % kernel_text,
        )
    elif peermem_known and dma_buf is False:
        result.update(
            possible=False,
            why="nvidia_peermem is not loaded, and dma-buf needs Linux 5.12+ with the open NVIDIA"
            " kernel module (here: Linux %s, %s module)" % (kernel_text, nvidia_flavour),
        )
    else:
        result["why"] = "the loaded modules could not be read, and dma-buf is not available"
    return result


# ---------------------------------------------------------------- NCCL's network plugins


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


# ---------------------------------------------------------------- NCCL's network settings


def nccl_settings(
    environ: Mapping[str, str], conf_files: Sequence[Tuple[str, Mapping[str, str]]]
) -> Dict[str, Dict[str, str]]:
    """{NAME: {"value", "source"}} for each network setting set, as NCCL reads them: the
    environment, then the conf files in order (the first that sets a name wins)."""
    found: Dict[str, Dict[str, str]] = {}
    for name in NET_SETTINGS:
        if name in environ:
            found[name] = {"value": environ[name], "source": "environment"}
            continue
        for label, settings in conf_files:
            if name in settings:
                found[name] = {"value": settings[name], "source": label}
                break
    return found


def resolve_settings(
    settings: Dict[str, Dict[str, Any]],
    devices: Optional[Mapping[str, Any]],
    netdevs: Optional[Sequence[str]],
    plugins: Mapping[str, Any],
) -> Optional[List[str]]:
    """Resolve each setting that names devices against those that exist, in place (`resolves_to`,
    `names_nothing`, `note`); the problems, one line each, or None when the devices could not be
    read (a setting then cannot be judged)."""
    problems: List[str] = []
    judged = True
    for name, setting in settings.items():
        value = setting["value"]
        if name == "NCCL_IB_HCA":
            ports = _port_names(devices)
            problem = _resolve_list(setting, ports, "RDMA port", with_ports=True)
            judged = judged and ports is not None
        elif name == "NCCL_SOCKET_IFNAME":
            problem = _resolve_list(setting, netdevs, "network interface", with_ports=False)
            judged = judged and netdevs is not None
        elif name == "NCCL_NET":
            problem = _resolve_net(setting, devices, plugins)
            judged = judged and devices is not None
        elif name == "NCCL_NET_PLUGIN":
            problem = _resolve_plugin(setting, plugins)
        else:
            continue
        if problem:
            problems.append("%s=%s (%s): %s" % (name, value, setting["source"], problem))
    return problems if judged or problems else None


def _port_names(devices: Optional[Mapping[str, Any]]) -> Optional[List[Tuple[str, int]]]:
    if devices is None:
        return None
    return [
        (name, int(port))
        for name in natural_sorted(devices)
        for port in sorted(devices[name]["ports"], key=natural_key)
        if port.isdigit()
    ]


def _resolve_list(
    setting: Dict[str, Any],
    existing: Optional[Sequence[Any]],
    what: str,
    with_ports: bool,
) -> Optional[str]:
    parsed = parse_name_list(setting["value"])
    if existing is None:
        setting["note"] = "not judged: the %ss could not be read" % what
        return None
    matched: List[str] = []
    nothing: List[str] = []
    wider: List[str] = []  # NCCL matches prefixes: mlx5_1 is also mlx5_10 and mlx5_11
    for entry in parsed["entries"]:
        hits = []
        for item in existing:
            name, port = item if with_ports else (item, None)
            if not name_matches(name, entry["name"], parsed["exact"]):
                continue
            if with_ports and entry["port"] is not None and entry["port"] != port:
                continue
            hits.append("%s/%s" % (name, port) if with_ports else name)
        label = entry["name"] + (":%d" % entry["port"] if entry["port"] is not None else "")
        if hits:
            matched += [h for h in hits if h not in matched]
        else:
            nothing.append(label)
        others = sorted({h.split("/")[0] for h in hits} - {entry["name"]})
        if others and not parsed["exact"]:
            wider.append("%s also matches %s" % (label, ", ".join(natural_sorted(others))))
    every = ["%s/%s" % item if with_ports else item for item in existing]
    chosen = [x for x in every if x not in matched] if parsed["exclude"] else matched
    setting["resolves_to"] = chosen
    setting["names_nothing"] = nothing
    if wider:
        setting["note"] = "; ".join(wider) + " (NCCL matches prefixes: a leading = matches exactly)"
    names = ", ".join(every) or "none"
    if parsed["exclude"]:
        if nothing:
            setting["note"] = "excludes %s, which match no %s here" % (", ".join(nothing), what)
        if not chosen:
            return "excludes every %s here (%s)" % (what, names)
        return None
    if not parsed["entries"]:
        return "names no %s" % what
    if nothing:
        return "%s name%s no %s here (%ss here: %s)" % (
            ", ".join(nothing),
            "s" if len(nothing) == 1 else "",
            what,
            what,
            names,
        )
    return None


def _resolve_net(
    setting: Dict[str, Any], devices: Optional[Mapping[str, Any]], plugins: Mapping[str, Any]
) -> Optional[str]:
    value = setting["value"].strip()
    if value.lower() == "socket":
        return None
    if value.lower() == "ib":
        if devices is None:
            setting["note"] = "not judged: the RDMA devices could not be read"
            return None
        return None if devices else "NCCL's IB transport needs an RDMA device, and there is none"
    loads = plugins.get("loads")
    if loads is None:
        return "names a network plugin's transport, and NCCL loads no plugin here (%s)" % (
            ", ".join(plugins.get("tries") or []) or "NCCL_NET_PLUGIN=none"
        )
    known = PLUGIN_NET_NAMES.get(loads.get("kind") or "")
    if known and value.lower() not in [name.lower() for name in known]:
        return "the plugin NCCL loads (%s) calls its transport %s" % (
            loads.get("kind"),
            " or ".join(known),
        )
    return None


def _resolve_plugin(setting: Dict[str, Any], plugins: Mapping[str, Any]) -> Optional[str]:
    if not plugins.get("tries"):
        return None  # none: NCCL's internal transports, as asked
    if plugins.get("loads") is None:
        return "no such library on NCCL's search path (tried %s)" % ", ".join(plugins["tries"])
    setting["resolves_to"] = [plugins["loads"].get("path")]
    return None


def gid_index_check(
    settings: Mapping[str, Mapping[str, Any]], devices: Optional[Mapping[str, Any]]
) -> Dict[str, Any]:
    """The GID each RoCE port NCCL would use gets from NCCL_IB_GID_INDEX, and whether it is a RoCE
    v2 entry. Unset, NCCL (2.21+) picks a RoCE v2 GID itself: then each such port needs one.
    `problems` is None where the GID tables could not be read."""
    setting = settings.get("NCCL_IB_GID_INDEX", {}).get("value")
    result: Dict[str, Any] = {"setting": setting, "ports": {}, "problems": []}
    ib_disable = settings.get("NCCL_IB_DISABLE", {}).get("value", "").strip()
    net = settings.get("NCCL_NET", {}).get("value", "").strip().lower()
    if ib_disable not in ("", "0") or (net and net != "ib"):
        result["note"] = "NCCL's IB transport is not used here (NCCL_IB_DISABLE / NCCL_NET)"
        return result
    if devices is None:
        result["problems"] = None
        return result
    hca = settings.get("NCCL_IB_HCA", {}).get("resolves_to")
    problems: List[str] = []
    for name in natural_sorted(devices):
        for number, port in sorted(devices[name]["ports"].items()):
            label = port_label(name, number)
            if (port["link_layer"] or "").lower() != "ethernet" or port["state"] != "ACTIVE":
                continue
            if hca is not None and label not in hca:
                continue
            if port["gids"] is None:
                result["problems"] = None
                return result
            entry, problem = _port_gid(port["gids"], setting)
            result["ports"][label] = entry
            if problem:
                problems.append("%s: %s" % (label, problem))
    result["problems"] = problems
    return result


def _port_gid(gids: Mapping[str, Any], setting: Optional[str]) -> Tuple[Dict[str, Any], str]:
    table = ", ".join(
        "%s %s %s" % (index, g["type"] or "type?", ipv4_of(g["gid"]) or gid_family(g["gid"]))
        for index, g in gids.items()
    )
    if setting is None:
        v2 = [i for i, g in gids.items() if g["type"] == "RoCE v2"]
        v2_ipv4 = [i for i in v2 if gid_family(gids[i]["gid"]) == "ipv4"]
        pick = (v2_ipv4 or v2)[0] if v2 else None
        entry = {"index": pick, "type": gids[pick]["type"] if pick else None}
        entry["gid"] = gids[pick]["gid"] if pick else None
        if not v2:
            return entry, "no RoCE v2 GID for NCCL to pick (GID table: %s)" % (table or "empty")
        return entry, ""
    index = setting.strip()
    gid = gids.get(index)
    entry = {
        "index": index,
        "type": gid["type"] if gid else None,
        "gid": gid["gid"] if gid else None,
    }
    if gid is None:
        return entry, "GID index %s is empty (GID table: %s)" % (index, table or "empty")
    if gid["type"] != "RoCE v2":
        return entry, "GID index %s is %s, not RoCE v2 (GID table: %s)" % (
            index,
            gid["type"],
            table,
        )
    return entry, ""


# ---------------------------------------------------------------- the probe


def conf_files(tree: Tree, environ: Mapping[str, str]) -> List[Tuple[str, Dict[str, str]]]:
    """NCCL's config files present, in precedence order: $NCCL_CONF_FILE (or ~/.nccl.conf), then
    /etc/nccl.conf. Labelled as NCCL names them, so hosts with different users still compare."""
    paths: List[Tuple[str, str]] = []
    if environ.get("NCCL_CONF_FILE"):
        paths.append((environ["NCCL_CONF_FILE"], environ["NCCL_CONF_FILE"]))
    elif environ.get("HOME"):
        paths.append((USER_CONF, os.path.join(environ["HOME"], ".nccl.conf")))
    paths.append((SYSTEM_CONF, SYSTEM_CONF))
    found = []
    for label, path in paths:
        text = tree.read(path)
        if text is not None:
            found.append((label, parse_nccl_conf(text)))
    return found


def probe_host(
    root: str,
    environ: Mapping[str, str],
    ldconfig_text: Optional[str],
    python_paths: Sequence[str],
) -> Dict[str, Any]:
    """Everything the probe reports, read under `root` through one Tree."""
    started = time.monotonic()
    tree = Tree(root)
    timings: Dict[str, float] = {}
    data: Dict[str, Any] = {}
    data.update(read_rdma(tree))
    data.update(read_netdevs(tree))
    timings["sysfs"] = round(time.monotonic() - started, 4)
    data.update(read_modules(tree))
    devices = data["rdma"]["devices"]
    data["gpudirect_rdma"] = gpudirect_rdma(
        data["modules"],
        None if devices is None else bool(devices),
        parse_kernel_release(tree.read(PROC_OSRELEASE)),
        parse_nvidia_flavour(tree.read(PROC_NVIDIA_VERSION)),
    )
    settings = nccl_settings(environ, conf_files(tree, environ))
    plugin_started = time.monotonic()
    search = PluginSearch(tree, environ, ldconfig_text, python_paths)
    data["nccl_plugins"] = read_plugins(search, settings.get("NCCL_NET_PLUGIN", {}).get("value"))
    timings["plugins"] = round(time.monotonic() - plugin_started, 4)
    all_netdevs = None
    if data["netdevs"] is not None:
        all_netdevs = natural_sorted(list(data["netdevs"]) + list(data["virtual_netdevs"] or []))
    data["settings_problems"] = resolve_settings(
        settings, devices, all_netdevs, data["nccl_plugins"]
    )
    data["nccl_settings"] = settings
    data["gid_index"] = gid_index_check(settings, devices)
    data["unreadable"] = sorted(set(tree.unreadable))
    timings["total"] = round(time.monotonic() - started, 4)
    data["timings_s"] = timings
    return data


def ldconfig_output(timeout_s: float) -> Optional[str]:
    """`ldconfig -p`, or None when ldconfig is absent or fails."""
    executable = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.isfile(p)), None
    )
    if executable is None:
        return None
    try:
        completed = subprocess.run(
            [executable, "-p"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout.decode("utf-8", "replace") if completed.returncode == 0 else None


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Touch the host; return {"ok": bool, "data": {...}, "error": str | None}."""
    environ = {k: v for k, v in os.environ.items() if k.startswith("NCCL_") or k in ENV_READ}
    data = probe_host(
        "/",
        environ,
        ldconfig_output(float(options.get("ldconfig_timeout_s", LDCONFIG_TIMEOUT_S))),
        [p for p in sys.path if p],
    )
    return {"ok": True, "data": data, "error": None}


# Besides NCCL_*, the variables read: where libraries are found, and where ~/.nccl.conf is.
ENV_READ = ("LD_LIBRARY_PATH", "HOME")


def _int(text: Optional[str]) -> Optional[int]:
    """Decimal, or hex with 0x ("0x15b3", a PCI vendor); None for anything else."""
    if text is None:
        return None
    text = text.strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


if __name__ == "__main__":
    del sys.path[0]  # so that `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
