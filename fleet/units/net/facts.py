"""A host's network read across two probes: which GPUs are nearest to each RDMA NIC. Pure.

The `net` probe reports each RDMA device with its PCI bus id and NUMA node; the `gpu` probe reports
`nvidia-smi topo -m` (its NIC columns, the NIC legend that names them, each GPU's NUMA affinity).
A probe never reads another probe's data, so the join is made here, on the controller, and rules
read it as `_nic_gpus` (fleet/units/net/checks.py).

The nearest GPUs of a NIC are those with the closest link to it in the topology matrix (PIX, a
single PCIe switch, before PXB, PHB, NODE and SYS); where the matrix has no column for the NIC,
those on its NUMA node; where neither can be told, `gpus` is null (unknown, not "none").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# nvidia-smi's link classes, nearest first; SOC is what old drivers call SYS.
LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS")
ALIASES = {"SOC": "SYS"}
GPU = re.compile(r"^GPU\d+$")
TOPOLOGY = "nvidia-smi topo -m"
NUMA = "NUMA node"


def nic_gpus(
    net: Mapping[str, Any] | None, gpu: Mapping[str, Any] | None
) -> dict[str, dict[str, Any]] | None:
    """{RDMA device: {"gpus": [...] | None, "link": str | None, "basis": str | None}} for every
    RDMA device the net probe reported; None when its devices could not be read."""
    rdma = (net or {}).get("rdma") or {}
    devices = rdma.get("devices")
    if not isinstance(devices, Mapping):
        return None
    topology = (gpu or {}).get("topology") or {}
    columns = nic_columns(topology)
    found: dict[str, dict[str, Any]] = {}
    for name, device in devices.items():
        nearest = from_topology(topology, columns.get(name))
        if nearest is None:
            nearest = from_numa(topology, (device or {}).get("numa_node"))
        found[name] = nearest or {"gpus": None, "link": None, "basis": None}
    return found


def nic_columns(topology: Mapping[str, Any]) -> dict[str, int]:
    """RDMA device name -> its column in the matrix: NICn through the NIC legend, or the device's
    own name (older drivers head the columns mlx5_0, ...)."""
    legend = topology.get("nics") or {}
    devices: Sequence[str] = topology.get("devices") or []
    return {legend.get(column, column): i for i, column in enumerate(devices)}


def from_topology(topology: Mapping[str, Any], column: int | None) -> dict[str, Any] | None:
    if column is None:
        return None
    devices: Sequence[str] = topology.get("devices") or []
    matrix: Sequence[Sequence[str]] = topology.get("matrix") or []
    ranked: dict[int, list[str]] = {}
    for row, name in enumerate(devices):
        if not GPU.match(name) or row >= len(matrix) or column >= len(matrix[row]):
            continue
        cell = ALIASES.get(matrix[row][column], matrix[row][column])
        if cell in LINKS:
            ranked.setdefault(LINKS.index(cell), []).append(name)
    if not ranked:
        return None
    best = min(ranked)
    return {"gpus": ranked[best], "link": LINKS[best], "basis": TOPOLOGY}


def from_numa(topology: Mapping[str, Any], numa_node: Any) -> dict[str, Any] | None:
    affinity: Mapping[str, Any] = topology.get("numa_affinity") or {}
    if numa_node is None or not affinity:
        return None
    gpus = [gpu for gpu, node in affinity.items() if _numa_nodes(node) == {int(numa_node)}]
    return {"gpus": gpus, "link": f"NUMA node {int(numa_node)}", "basis": NUMA}


def _numa_nodes(text: Any) -> set[int]:
    """nvidia-smi's NUMA affinity cell: "0", "0-1", "0,2"; N/A reads as no node."""
    nodes: set[int] = set()
    for part in str(text or "").split(","):
        low, _, high = part.strip().partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            nodes.update(range(int(low), int(high or low) + 1))
    return nodes
