"""Network interfaces from /sys/class/net: those backed by a device with their link facts (kind,
state, speed, MTU, driver, PCI bus id, NUMA node), the virtual ones by name.

Not a probe (the leading underscore): shipped with the net probe (its `SHIPS`), stdlib only,
Python 3.8, importable by name on the host.
"""

from __future__ import annotations

from typing import Any, Dict

from _net_tree import Tree, to_int

SYS_NET = "sys/class/net"
ARPHRD = {1: "ethernet", 32: "infiniband", 772: "loopback"}


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
    arphrd = to_int(tree.read(base + "/type"))
    speed = to_int(tree.read(base + "/speed"))
    numa = to_int(tree.read(base + "/device/numa_node"))
    if numa is None:  # a virtio NIC: its PCI function, one up, has the NUMA node
        numa = to_int(tree.read(base + "/device/../numa_node"))
    return {
        "kind": ARPHRD.get(arphrd or -1, "type %s" % arphrd if arphrd is not None else None),
        "operstate": tree.read(base + "/operstate"),
        "carrier": to_int(tree.read(base + "/carrier")),
        "speed_mbps": speed if speed is not None and speed > 0 else None,
        "mtu": to_int(tree.read(base + "/mtu")),
        "driver": tree.link_name(base + "/device/driver"),
        "pci_bus_id": tree.pci_address(base + "/device"),
        "numa_node": numa if numa is not None and numa >= 0 else None,
    }
