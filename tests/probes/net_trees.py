"""The golden sysfs trees of the `net` probe (tests/probes/golden/net/), built from public captures.

Each case folder holds `root/`, a sysfs and procfs tree with the files and links the probe reads
(the class entries are folders whose `device` links to the PCI function under /sys/devices; a host
has them as links into /sys/devices whose `device` links back up, loops that the trees leave out so
that whatever walks them, pytest's collection too, ends), `env.json` (the NCCL settings the probe is
run with) and `expected.json` (what the probe reports). What is real and what is reconstructed is
said in golden/net/SOURCE.md: the values a capture holds are copied from it; what no capture holds
(PCI addresses, NUMA nodes, netdev names, GID tables, module lists) is made up, plausibly, and said.

    python -m tests.probes.net_trees build      # rewrite every case's root/ from the captures
    python -m tests.probes.net_trees expected   # rewrite every case's expected.json
    python -m tests.probes.net_trees capture-net [ROOT]  # this host's /sys/class/net, as JSON

The test tests/probes/test_net.py rebuilds each tree into a temporary folder and compares it with
the committed one, so the trees never drift from this file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "golden" / "net"
CAPTURES = GOLDEN / "captures"
GPUD = CAPTURES / "gpud"
GPUD_SYSFS = GPUD / "sys-class-infiniband-h100.0"

Spec = dict[str, Any]

# ibstat's words -> the sysfs text the kernel writes (drivers/infiniband/core/sysfs.c).
STATES = {"Down": "1: DOWN", "Initializing": "2: INIT", "Armed": "3: ARMED", "Active": "4: ACTIVE"}
PHYS_STATES = {"Sleep": "1: Sleep", "Polling": "2: Polling", "Disabled": "3: Disabled",
               "LinkUp": "5: LinkUp", "LinkErrorRecovery": "6: LinkErrorRecovery"}  # fmt: skip
# ibstat's Rate (Gb/s) -> the kernel's rate text; width and lane speed are the usual ones for
# these parts (reconstructed: ibstat prints only the number).
RATES = {
    400: "400 Gb/sec (4X NDR)",
    200: "200 Gb/sec (4X HDR)",
    100: "100 Gb/sec (4X EDR)",
    40: "40 Gb/sec (4X QDR)",
    10: "10 Gb/sec (4X SDR)",
}
MELLANOX = "0x15b3"
AMAZON = "0x1d0f"


# ---------------------------------------------------------------- writing a tree


class TreeWriter:
    """Writes files and relative symlinks under `root`, as sysfs shows them (text + newline)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def file(self, relative: str, text: str | None, newline: bool = True) -> None:
        if text is None:
            return
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + ("\n" if newline else ""))

    def link(self, relative: str, target: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(self.root / target, path.parent), path)

    def folder(self, relative: str) -> None:
        (self.root / relative).mkdir(parents=True, exist_ok=True)

    def pci_device(self, bdf: str, numa: int | None, vendor: str, driver: str) -> str:
        """A PCI function under its host bridge; its folder, relative to the root."""
        bridge = f"pci{bdf[:4]}:{bdf[5:7]}"
        where = f"sys/devices/{bridge}/{bdf}"
        self.file(where + "/numa_node", None if numa is None else str(numa))
        self.file(where + "/vendor", vendor)
        self.folder("sys/bus/pci/drivers/" + driver)
        self.link(where + "/driver", "sys/bus/pci/drivers/" + driver)
        self.link("sys/bus/pci/devices/" + bdf, where)
        return where

    def netdev(self, name: str, device: str | None, attrs: Mapping[str, Any]) -> None:
        """/sys/class/net/NAME, its `device` linking to its PCI function; that function's net/NAME
        holds `dev_port` (how ibdev2netdev ties a netdev to an RDMA port)."""
        where = "sys/class/net/" + name
        for key in ("type", "mtu", "operstate", "carrier", "speed", "dev_port", "dev_id"):
            if attrs.get(key) is not None:
                self.file(f"{where}/{key}", str(attrs[key]))
        if device:
            self.link(where + "/device", device)
            for key in ("dev_port", "dev_id"):
                if attrs.get(key) is not None:
                    self.file(f"{device}/net/{name}/{key}", str(attrs[key]))

    def rdma_device(self, spec: Spec) -> None:
        device = self.pci_device(spec["pci"], spec.get("numa"), spec["vendor"], spec["driver"])
        where = "sys/class/infiniband/" + spec["name"]
        for key, value in spec.get("attrs", {}).items():
            self.file(f"{where}/{key}", value, newline=spec.get("newline", True))
        for key, source in spec.get("copied", {}).items():
            self.root.joinpath(where, key).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, self.root / where / key)
        self.link(where + "/device", device)
        for number, port in spec["ports"].items():
            self.rdma_port(f"{where}/ports/{number}", port, spec.get("newline", True))
        for netdev in spec.get("netdevs", []):
            self.netdev(netdev["name"], device, netdev)

    def rdma_port(self, where: str, port: Spec, newline: bool) -> None:
        for key in ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid"):
            self.file(f"{where}/{key}", port.get(key), newline=newline)
        for key, source in port.get("copied", {}).items():
            self.root.joinpath(where, key).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, self.root / where / key)
        gids = {index: (gid, kind, ndev) for index, gid, kind, ndev in port.get("gids", [])}
        # The populated slots and the two after them (a host has 128 or 256: the rest are alike).
        for index in range(max(gids, default=-1) + 3):
            gid, kind, ndev = gids.get(index, ("0000:" * 7 + "0000", None, None))
            self.file(f"{where}/gids/{index}", gid)
            # An empty slot's type and ndev read as EINVAL on a host: absent here (also None).
            self.file(f"{where}/gid_attrs/types/{index}", kind)
            self.file(f"{where}/gid_attrs/ndevs/{index}", ndev)
        for index, key in enumerate(port.get("pkeys", [])):
            self.file(f"{where}/pkeys/{index}", key)

    def proc(self, spec: Spec) -> None:
        modules = spec.get("modules")
        if modules is not None:
            lines = [f"{name} 65536 0 - Live 0x0000000000000000" for name in modules]
            self.file("proc/modules", "\n".join(lines))
            for name, version in spec.get("module_versions", {}).items():
                self.file(f"sys/module/{name}/version", version)
            for name in modules:
                self.folder("sys/module/" + name)
        self.file("proc/sys/kernel/osrelease", spec.get("osrelease"))
        self.file("proc/driver/nvidia/version", spec.get("nvidia_version"))
        for name in spec.get("dev_infiniband", []):
            self.file("dev/infiniband/" + name, "", newline=False)
        for relative, text in spec.get("files", {}).items():
            self.file(relative, text, newline=False)
        for relative, target in spec.get("links", {}).items():
            self.link(relative, target)


# ---------------------------------------------------------------- reading the captures


def parse_ibstat(text: str) -> list[Spec]:
    """`ibstat` -> one dict per CA: its fields and its ports' fields, as ibstat prints them."""
    devices: list[Spec] = []
    port: Spec | None = None
    for line in text.splitlines():
        ca = re.match(r"^CA '([^']+)'", line)
        if ca:
            devices.append({"name": ca.group(1), "ports": {}})
            port = None
            continue
        numbered = re.match(r"^\s+Port (\d+):\s*$", line)
        if numbered and devices:
            port = devices[-1]["ports"][numbered.group(1)] = {}
            continue
        field = re.match(r"^\s+([^:]+):\s*(.*?)\s*$", line)
        if field and devices:
            (port if port is not None else devices[-1])[field.group(1)] = field.group(2)
    return devices


def parse_show_gids(text: str) -> dict[str, list[tuple[int, str, str, str]]]:
    """`show_gids` -> {device/port: [(index, gid, "RoCE v1" | "RoCE v2", netdev)]}."""
    found: dict[str, list[tuple[int, str, str, str]]] = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) < 6 or not cells[2].isdigit():
            continue
        kind = {"v1": "IB/RoCE v1", "v2": "RoCE v2"}.get(cells[-2])
        if kind is None:
            continue  # a line cut short in the capture
        found.setdefault(f"{cells[0]}/{cells[1]}", []).append(
            (int(cells[2]), cells[3], kind, cells[-1])
        )
    return found


def sysfs_guid(value: str) -> str:
    """ibstat's 0xa088c20300e3142a -> sysfs's a088:c203:00e3:142a."""
    digits = value.lower().removeprefix("0x").rjust(16, "0")
    return ":".join(digits[i : i + 4] for i in range(0, 16, 4))


def link_local_gid(port_guid: str) -> str:
    digits = sysfs_guid(port_guid)
    return "fe80:0000:0000:0000:" + digits


def ipv4_gid(address: str) -> str:
    parts = [int(p) for p in address.split(".")]
    return "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}".format(*tuple(parts))


def from_ibstat(
    ca: Spec, pci: str, numa: int, netdev: str, ipv4: str | None, board_id: str | None
) -> Spec:
    """One CA of an ibstat capture as a device spec. Real: type, firmware, GUIDs, port state,
    physical state, rate, LIDs, link layer. Reconstructed: the rest (arguments)."""
    port = ca["ports"]["1"]
    ethernet = port["Link layer"] == "Ethernet"
    active = port["State"] == "Active"
    gids: list[tuple[int, str, str | None, str | None]] = []
    if ethernet:
        gid = link_local_gid(port["Port GUID"])
        gids += [(0, gid, "IB/RoCE v1", netdev), (1, gid, "RoCE v2", netdev)]
        if active and ipv4:
            gids += [
                (2, ipv4_gid(ipv4), "IB/RoCE v1", netdev),
                (3, ipv4_gid(ipv4), "RoCE v2", netdev),
            ]
    else:
        gids.append((0, link_local_gid(port["Port GUID"]), "IB/RoCE v1", None))
    return {
        "name": ca["name"],
        "pci": pci,
        "numa": numa,
        "vendor": MELLANOX,
        "driver": "mlx5_core",
        "attrs": {
            "board_id": board_id,
            "fw_ver": ca["Firmware version"],
            "hca_type": ca["CA type"],
            "node_type": "1: CA",
            "node_guid": sysfs_guid(ca["Node GUID"]),
            "sys_image_guid": sysfs_guid(ca["System image GUID"]),
        },
        "ports": {
            "1": {
                "state": STATES[port["State"]],
                "phys_state": PHYS_STATES[port["Physical state"]],
                "rate": RATES[int(port["Rate"])],
                "link_layer": port["Link layer"],
                "lid": "0x{:x}".format(int(port["Base lid"])),
                "sm_lid": "0x{:x}".format(int(port["SM lid"])),
                "gids": gids,
                "pkeys": [] if ethernet else ["0xffff", "0x0000"],
            }
        },
        "netdevs": [
            {
                "name": netdev,
                "dev_port": 0,
                "type": 1 if ethernet else 32,
                "mtu": 9000 if ethernet else 4092,
                "operstate": "up" if active else "down",
                "carrier": 1 if active else 0,
                "speed": int(port["Rate"]) * 1000 if active else None,
            }
        ],
    }


# ---------------------------------------------------------------- the cases

# Reconstructed PCI layout of an 8-GPU H100 board (two host bridges per socket, one NIC under
# each GPU's PCIe switch), used where a capture has no PCI addresses: (bdf, numa node).
H100_IB_SLOTS = [
    ("0000:1a:00.0", 0),
    ("0000:3c:00.0", 0),
    ("0000:4d:00.0", 0),
    ("0000:5e:00.0", 0),
    ("0000:9c:00.0", 1),
    ("0000:bc:00.0", 1),
    ("0000:cc:00.0", 1),
    ("0000:dc:00.0", 1),
]
PROC_IB = {
    "modules": [
        "nvidia_peermem",
        "nvidia",
        "ib_ipoib",
        "ib_umad",
        "rdma_ucm",
        "rdma_cm",
        "ib_uverbs",
        "mlx5_ib",
        "ib_core",
        "mlx5_core",
    ],
    "module_versions": {"mlx5_core": "24.04-0.6.6"},
    "osrelease": "5.15.0-1053-nvidia",
    "nvidia_version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12"
    " 19:39:15 UTC 2024\nGCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)",
}
PROC_ROCE = {
    "modules": ["nvidia", "rdma_ucm", "rdma_cm", "ib_uverbs", "mlx5_ib", "ib_core", "mlx5_core"],
    "osrelease": "5.15.0-119-generic",
    "nvidia_version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07"
    "  Fri May 31 09:30:47 UTC 2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)",
}


def ib_dev_nodes(count: int) -> list[str]:
    names = ["rdma_cm"]
    for i in range(count):
        names += [f"uverbs{i}", f"umad{i}", f"issm{i}"]
    return names


def case_h100_ib8_gpud_sysfs() -> Spec:
    """gpud's real /sys/class/infiniband of an H100 host: 8 CX-7 NDR IB ports and a BlueField-3
    RoCE bond. The attributes and port files are copied byte for byte; the rest is made up."""
    ibstat = {
        ca["name"]: ca for ca in parse_ibstat((GPUD / "ibstat.47.0.h100.some.down.0").read_text())
    }
    guid_donors = [
        n for n in sorted(ibstat) if ibstat[n]["ports"]["1"]["Link layer"] == "InfiniBand"
    ]
    devices = []
    ib_names = sorted(p.name for p in GPUD_SYSFS.iterdir() if p.name != "mlx5_bond_0")
    for (bdf, numa), name, donor in zip(H100_IB_SLOTS, ib_names, guid_donors):
        guid = ibstat[donor]["Node GUID"]
        netdev = f"ibp{int(bdf[5:7], 16)}s0"
        devices.append(
            {
                "name": name,
                "pci": bdf,
                "numa": numa,
                "vendor": MELLANOX,
                "driver": "mlx5_core",
                "newline": False,
                "copied": {f: GPUD_SYSFS / name / f for f in ("board_id", "fw_ver", "hca_type")},
                "attrs": {
                    "node_type": "1: CA",
                    "node_guid": sysfs_guid(guid),
                    "sys_image_guid": sysfs_guid(guid),
                },
                "ports": {
                    "1": {
                        "copied": {
                            f: GPUD_SYSFS / name / "ports" / "1" / f
                            for f in ("state", "phys_state", "rate", "link_layer")
                        },
                        "lid": "0x{:x}".format(int(ibstat[donor]["ports"]["1"]["Base lid"])),
                        "sm_lid": "0x{:x}".format(int(ibstat[donor]["ports"]["1"]["SM lid"])),
                        "gids": [(0, link_local_gid(guid), "IB/RoCE v1", None)],
                        "pkeys": ["0xffff", "0x0000"],
                    }
                },
                "netdevs": [
                    {
                        "name": netdev,
                        "dev_port": 0,
                        "type": 32,
                        "mtu": 4092,
                        "operstate": "up",
                        "carrier": 1,
                        "speed": 400000,
                    }
                ],
            }
        )
    bond = "mlx5_bond_0"
    bond_mac_gid = "fe80:0000:0000:0000:5e25:73ff:fe3a:9c10"
    devices.append(
        {
            "name": bond,
            "pci": "0000:2a:00.0",
            "numa": 0,
            "vendor": MELLANOX,
            "driver": "mlx5_core",
            "newline": False,
            "copied": {f: GPUD_SYSFS / bond / f for f in ("board_id", "fw_ver", "hca_type")},
            "attrs": {
                "node_type": "1: CA",
                "node_guid": "5c25:7303:003a:9c10",
                "sys_image_guid": "5c25:7303:003a:9c10",
            },
            "ports": {
                "1": {
                    "copied": {
                        f: GPUD_SYSFS / bond / "ports" / "1" / f
                        for f in ("state", "phys_state", "rate", "link_layer")
                    },
                    "lid": "0x0",
                    "sm_lid": "0x0",
                    "gids": [
                        (0, bond_mac_gid, "IB/RoCE v1", "bond0"),
                        (1, bond_mac_gid, "RoCE v2", "bond0"),
                        (2, ipv4_gid("10.12.4.21"), "IB/RoCE v1", "bond0"),
                        (3, ipv4_gid("10.12.4.21"), "RoCE v2", "bond0"),
                    ],
                }
            },
            "netdevs": [
                {
                    "name": "enp42s0f0np0",
                    "dev_port": 0,
                    "type": 1,
                    "mtu": 9000,
                    "operstate": "up",
                    "carrier": 1,
                    "speed": 200000,
                }
            ],
        }
    )
    return {
        "devices": devices,
        "virtual_netdevs": {
            "bond0": {"type": 1, "mtu": 9000, "operstate": "up"},
            "lo": {"type": 772},
        },
        "proc": dict(PROC_IB, dev_infiniband=ib_dev_nodes(9)),
    }


def roce_case(capture: str, base_ip: str) -> Spec:
    """One of gpud's ibstat captures of an H100 RoCE host: 8 CX-7 400 GbE (MT4129) and 4 CX-6 Dx
    100 GbE (MT4125) ports. PCI layout, netdev names, IPv4 addresses and GID tables made up."""
    cas = parse_ibstat((GPUD / capture).read_text())
    cx7 = sorted(
        (ca for ca in cas if ca["CA type"] == "MT4129"), key=lambda ca: _natural(ca["name"])
    )
    cx6 = sorted(
        (ca for ca in cas if ca["CA type"] == "MT4125"), key=lambda ca: _natural(ca["name"])
    )
    devices = []
    for i, ((bdf, numa), ca) in enumerate(zip(H100_IB_SLOTS, cx7)):
        netdev = f"enp{int(bdf[5:7], 16)}s0np0"
        ip = f"{base_ip}.{10 + i}"
        devices.append(from_ibstat(ca, bdf, numa, netdev, ip, "MT_0000000838"))
    for i, ca in enumerate(cx6):
        bus = (0x2A, 0xAA)[i // 2]
        bdf = f"0000:{bus:02x}:00.{i % 2}"
        netdev = f"enp{bus}s0f{i % 2}np{i % 2}"
        devices.append(from_ibstat(ca, bdf, i // 2, netdev, f"{base_ip}.{100 + i}", None))
    return {
        "devices": devices,
        "virtual_netdevs": {"lo": {"type": 772}, "docker0": {"type": 1, "mtu": 1500}},
        "proc": dict(PROC_ROCE, dev_infiniband=["rdma_cm"] + [f"uverbs{i}" for i in range(12)]),
    }


def case_h100_ib8_eth_down_ibstat() -> Spec:
    """gpud's ibstat of an H100 host: 8 CX-7 NDR IB ports up, 4 CX-6 Dx Ethernet ports of which 3
    are down (Disabled)."""
    cas = parse_ibstat((GPUD / "ibstat.47.0.h100.some.down.0").read_text())
    ib = sorted((c for c in cas if c["CA type"] == "MT4129"), key=lambda c: _natural(c["name"]))
    eth = sorted((c for c in cas if c["CA type"] == "MT4125"), key=lambda c: _natural(c["name"]))
    devices = []
    for (bdf, numa), ca in zip(H100_IB_SLOTS, ib):
        devices.append(
            from_ibstat(ca, bdf, numa, f"ibp{int(bdf[5:7], 16)}s0", None, "MT_0000000838")
        )
    for i, ca in enumerate(eth):
        bus = (0x2A, 0xAA)[i // 2]
        bdf = f"0000:{bus:02x}:00.{i % 2}"
        netdev = f"enp{bus}s0f{i % 2}np{i % 2}"
        devices.append(from_ibstat(ca, bdf, i // 2, netdev, f"10.40.0.{20 + i}", None))
    return {
        "devices": devices,
        "virtual_netdevs": {"lo": {"type": 772}},
        "proc": dict(PROC_IB, dev_infiniband=ib_dev_nodes(12)),
    }


def case_roce4_gid_nccl1538() -> Spec:
    """The GID tables of NVIDIA/nccl issue 1538 (a Kubernetes pod, 4 RoCE HCAs on net1-net4): only
    indexes 4-7 hold entries, so the usual NCCL_IB_GID_INDEX=3 names an empty slot. The GIDs,
    types and netdevs are the capture's; the rest is made up."""
    tables = parse_show_gids((CAPTURES / "nccl1538_show_gids.txt").read_text())
    # The capture's last line is cut: index 7 of mlx5_3 is index 6's GID as RoCE v2, as for the
    # other three devices.
    last = tables["mlx5_3/1"]
    if not any(index == 7 for index, *_ in last):
        _index, gid, _, ndev = next(e for e in last if e[0] == 6)
        last.append((7, gid, "RoCE v2", ndev))
    devices = []
    for i, (label, gids) in enumerate(sorted(tables.items())):
        name, port = label.split("/")
        netdev = gids[0][3]
        bdf = "0000:%02x:00.1" % (0x18 + 0x20 * i)  # a virtual function handed to the pod
        devices.append(
            {
                "name": name,
                "pci": bdf,
                "numa": i // 2,
                "vendor": MELLANOX,
                "driver": "mlx5_core",
                "attrs": {"fw_ver": None, "hca_type": None, "node_type": "1: CA"},
                "ports": {
                    port: {
                        "state": "4: ACTIVE",
                        "phys_state": "5: LinkUp",
                        "link_layer": "Ethernet",
                        "gids": [(index, gid, kind, ndev) for index, gid, kind, ndev in gids],
                    }
                },
                "netdevs": [
                    {
                        "name": netdev,
                        "dev_port": 0,
                        "type": 1,
                        "mtu": 1500,
                        "operstate": "up",
                        "carrier": 1,
                    }
                ],
            }
        )
    return {
        "devices": devices,
        "netdevs": {"eth0": {"pci": None, "type": 1, "mtu": 1450, "operstate": "up", "carrier": 1}},
        "virtual_netdevs": {"lo": {"type": 772}},
        "proc": {"dev_infiniband": ["rdma_cm", "uverbs0", "uverbs1", "uverbs2", "uverbs3"]},
    }


def case_p4d_efa4() -> Spec:
    """An AWS p4d.24xlarge's 4 EFA devices, reconstructed from public facts (no whole capture):
    names rdmap16s27/32s27/144s27/160s27 (EFA node exporter output, uccl's p4d tables), PCI
    0000:{10,20,90,a0}:1b.0 (aws-ofi-nccl's p4d topology test), ENA netdevs ens32/65/130/163
    (uccl), vendor 0x1d0f, link layer "Unknown" in sysfs (linux-rdma/rdma-core#884), state ACTIVE
    and 100 Gb/s (amzn-drivers#114's ibstat), zero node GUID and empty firmware version."""
    devices = []
    for i, (name, bus, _netdev) in enumerate(
        [
            ("rdmap16s27", 0x10, "ens32"),
            ("rdmap32s27", 0x20, "ens65"),
            ("rdmap144s27", 0x90, "ens130"),
            ("rdmap160s27", 0xA0, "ens163"),
        ]
    ):
        bdf = f"0000:{bus:02x}:1b.0"
        devices.append(
            {
                "name": name,
                "pci": bdf,
                "numa": i // 2,
                "vendor": AMAZON,
                "driver": "efa",
                "attrs": {"fw_ver": "", "node_guid": "0000:0000:0000:0000", "node_type": "1: CA"},
                "ports": {
                    "1": {
                        "state": "4: ACTIVE",
                        "phys_state": "5: LinkUp",
                        "rate": "100 Gb/sec (4X EDR)",
                        "link_layer": "Unknown",
                        "lid": "0x0",
                        "sm_lid": "0x0",
                        "gids": [
                            (
                                0,
                                f"fe80:0000:0000:0000:1040:27ff:fe{i:02x}:{bus:02x}1b",
                                None,
                                None,
                            )
                        ],
                    }
                },
            }
        )
    netdevs = {
        netdev: {
            "pci": f"0000:{bus:02x}:1a.0",
            "driver": "ena",
            "numa": i // 2,
            "type": 1,
            "mtu": 9001,
            "operstate": "up",
            "carrier": 1,
        }
        for i, (bus, netdev) in enumerate(
            [(0x10, "ens32"), (0x20, "ens65"), (0x90, "ens130"), (0xA0, "ens163")]
        )
    }
    return {
        "devices": devices,
        "netdevs": netdevs,
        "virtual_netdevs": {"lo": {"type": 772}},
        "proc": {
            "modules": ["nvidia", "efa", "ib_uverbs", "ib_core", "ena"],
            "module_versions": {"efa": "2.10.0g"},
            "osrelease": "6.8.0-1021-aws",
            "nvidia_version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.127.05"
            "  Sun Nov 24 04:50:52 UTC 2024",
            "dev_infiniband": ["rdma_cm", "uverbs0", "uverbs1", "uverbs2", "uverbs3"],
            # A stand-in for aws-ofi-nccl where AWS installs it: text with the strings the real
            # library carries (its PACKAGE_STRING and log prefix), not the library.
            "files": {
                "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so": "stand-in for libnccl-net-ofi.so:"
                " NET/OFI Initializing aws-ofi-nccl 1.14.2\n"
            },
            "links": {
                "opt/amazon/ofi-nccl/lib/libnccl-net.so": "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
            },
        },
    }


def netdev_capture_case(
    capture: str, dev_infiniband: list[str] | None, proc: Spec | None = None
) -> Spec:
    """A host's real /sys/class/net (captured by `capture-net`), no RDMA device. `dev_infiniband`
    None: no /dev/infiniband and no /sys/class/infiniband; a list: both exist, the class empty."""
    captured = json.loads((CAPTURES / capture).read_text())
    netdevs = {n: a for n, a in captured.items() if a.get("device")}
    virtual = {n: a for n, a in captured.items() if not a.get("device")}
    return {
        "devices": [],
        "netdevs": netdevs,
        "virtual_netdevs": virtual,
        "proc": dict(proc or {}, dev_infiniband=dev_infiniband or []),
        "no_infiniband_class": dev_infiniband is None,
        "no_dev_infiniband": dev_infiniband is None,
    }


# The lent H200 VM (bench/device_net.sh, 2026-12-01): its /proc/modules, kernel and driver lines.
PROC_H200 = {
    "modules": ["nvidia_uvm", "nvidia"],
    "module_versions": {"nvidia": "580.159.04"},
    "osrelease": "6.18.44-fc-v657-gpu",
    "nvidia_version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04"
    "  Release Build  (nixbld@)",
}


CASES = {
    "h100_ib8_gpud_sysfs": case_h100_ib8_gpud_sysfs,
    "h100_ib8_eth_down_ibstat": case_h100_ib8_eth_down_ibstat,
    "h100_roce12_ibstat": lambda: roce_case("ibstat.47.0.h100.all.active.0", "10.20.0"),
    "h100_roce12_two_down_ibstat": lambda: roce_case(
        "ibstat.47.0.h100.some.down.with.polling.1", "10.20.1"
    ),
    "roce4_gid_nccl1538": case_roce4_gid_nccl1538,
    "p4d_efa4": case_p4d_efa4,
    "local_no_rdma": lambda: netdev_capture_case("local_sys_class_net.json", None),
    "h200_no_rdma": lambda: netdev_capture_case("h200_sys_class_net.json", ["rdma_cm"], PROC_H200),
}


def build(name: str, root: Path) -> None:
    """Write case `name`'s tree under `root` (which must not exist yet)."""
    spec = CASES[name]()
    writer = TreeWriter(root)
    root.mkdir(parents=True)
    for device in spec["devices"]:
        writer.rdma_device(device)
    if not spec["devices"] and not spec.get("no_infiniband_class"):
        writer.folder("sys/class/infiniband")
    for netdev, attrs in spec.get("netdevs", {}).items():
        pci = attrs.get("pci") or attrs.get("device")
        device = None
        if pci:
            device = writer.pci_device(pci, attrs.get("numa"), attrs.get("vendor", "0x1af4"),
                                       attrs.get("driver") or "unknown")  # fmt: skip
        writer.netdev(netdev, device, attrs)
    for netdev, attrs in spec.get("virtual_netdevs", {}).items():
        writer.netdev(netdev, None, attrs)
    proc = spec.get("proc", {})
    if spec.get("no_dev_infiniband"):
        proc = dict(proc, dev_infiniband=[])
    elif not proc.get("dev_infiniband"):
        writer.folder("dev/infiniband")
    writer.proc(proc)


def build_all(into: Path) -> None:
    """Every case's tree under `into/NAME` (to look at one by hand; the tests build their own)."""
    for name in CASES:
        root = into / name
        if root.exists():
            shutil.rmtree(root)
        build(name, root)


def tree_files(root: Path) -> Iterator[tuple[str, str]]:
    """(path, content or "-> target") of every file and symlink under `root`, sorted."""
    for folder, dirs, files in sorted(os.walk(root)):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            relative = str(path.relative_to(root))
            if path.is_symlink():
                yield relative, "-> " + os.readlink(path)
            elif path.is_file():
                yield relative, path.read_text()
            elif not any(path.iterdir()):
                yield relative, "(empty folder)"


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


# ---------------------------------------------------------------- capturing a host


def capture_net(root: str = "/") -> dict[str, Any]:
    """The /sys/class/net attributes the probe reads, of the host under `root`: None where the
    kernel refuses the read (speed of a link that is down, carrier of an interface that is down)."""

    def read(path: str) -> str | None:
        try:
            with open(path) as handle:
                return handle.read().strip()
        except OSError:
            return None

    found: dict[str, Any] = {}
    base = os.path.join(root, "sys/class/net")
    for name in sorted(os.listdir(base)):
        where = os.path.join(base, name)
        device = os.path.join(where, "device")
        attrs: dict[str, Any] = {
            key: read(os.path.join(where, key))
            for key in ("type", "mtu", "operstate", "carrier", "speed", "dev_port", "dev_id")
        }
        if os.path.exists(device):
            real = os.path.realpath(device)
            pci = next(
                (
                    p
                    for p in (real, os.path.dirname(real))
                    if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:", os.path.basename(p))
                ),
                None,
            )
            attrs["device"] = os.path.basename(pci) if pci else os.path.basename(real)
            attrs["driver"] = os.path.basename(os.readlink(os.path.join(device, "driver")))
            attrs["numa"] = read(os.path.join(device, "numa_node")) or read(
                os.path.join(os.path.dirname(real), "numa_node")
            )
        found[name] = attrs
    return found


def _netdev_numa(attrs: Mapping[str, Any]) -> int | None:
    value = attrs.get("numa")
    return int(value) if value not in (None, "") else None


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "build"
    if command == "build":
        build_all(Path(sys.argv[2]) if len(sys.argv) > 2 else Path("net-trees"))
    elif command == "capture-net":
        print(json.dumps(capture_net(sys.argv[2] if len(sys.argv) > 2 else "/"), indent=2))
    elif command == "expected":
        from tests.probes.net_cases import write_expected

        write_expected()
    else:
        sys.exit(
            "usage: python -m tests.probes.net_trees build [DIR] | expected | capture-net [ROOT]"
        )
