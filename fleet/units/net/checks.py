"""The net probe's helper in a host's rule document: `_nic_gpus`, each RDMA device's nearest GPUs
(the net and gpu probes joined, fleet/units/net/facts.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleet.checks import HostHelpers, plain_copy
from fleet.units.net.facts import nic_gpus

# Not a payload helper: it reads the RDMA devices' names and NUMA nodes and the GPU topology
# matrix, none of them masked, so it is alike within a group of hosts (fleet.checks.sharing).
HELPERS = {"_nic_gpus": "net"}


def add_helpers(document: dict[str, Any], host: HostHelpers, wanted: Callable[[str], bool]) -> None:
    probes = host.outcome.probes
    net = probes.get("net")
    if wanted("_nic_gpus") and net is not None and net.status == "ok":
        gpu = probes.get("gpu")
        gpu_data = gpu.data if gpu is not None and gpu.status == "ok" else None
        document["_nic_gpus"] = host.kept(
            ("_nic_gpus", id(net.data), id(gpu_data)),
            lambda: plain_copy(nic_gpus(net.data, gpu_data)),
        )
