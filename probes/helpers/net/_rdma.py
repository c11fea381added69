"""RDMA devices from sysfs: each device under /sys/class/infiniband, its ports (state, rate, link
layer), GID tables (RoCE v1/v2, IB) and P_Keys, and the views of them that rules read.

Not a probe (the leading underscore): shipped with the net probe (its `SHIPS`), stdlib only,
Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from _net_tree import Tree, natural_key, natural_sorted, port_label, to_int

SYS_INFINIBAND = "sys/class/infiniband"
DEV_INFINIBAND = "dev/infiniband"

# sysfs text -> values
PORT_STATE = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")  # "4: ACTIVE", "5: LinkUp"
RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")  # "400 Gb/sec (4X NDR)"
ZERO_GID = re.compile(r"^[0:]+$")
IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"


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
        "numa_node": to_int(tree.read(base + "/device/numa_node")),
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
        dev_port = to_int(tree.read("%s/device/net/%s/dev_port" % (base, netdev)))
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
