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
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import _ldconfig
import _net_kernel
import _net_plugin
import _net_settings
import _netdev
import _rdma
from _nccl_conf import SYSTEM_CONF, USER_CONF, parse_nccl_conf
from _net_tree import Tree, natural_sorted

TIMEOUT_S = 30
# The helpers the bundle carries with this probe, each importable by name on the host (the ones
# they import themselves included).
SHIPS = (
    "_net_tree.py",
    "_rdma.py",
    "_netdev.py",
    "_net_kernel.py",
    "_net_plugin.py",
    "_net_settings.py",
    "_nccl_conf.py",
    "_ldconfig.py",
)
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

LDCONFIG_TIMEOUT_S = 5.0
# Besides NCCL_*, the variables read: where libraries are found, and where ~/.nccl.conf is.
ENV_READ = ("LD_LIBRARY_PATH", "HOME")


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
    data.update(_rdma.read_rdma(tree))
    data.update(_netdev.read_netdevs(tree))
    timings["sysfs"] = round(time.monotonic() - started, 4)
    data.update(_net_kernel.read_modules(tree))
    devices = data["rdma"]["devices"]
    data["gpudirect_rdma"] = _net_kernel.host_gpudirect_rdma(tree, data["modules"], devices)
    settings = _net_settings.nccl_settings(environ, conf_files(tree, environ))
    plugin_started = time.monotonic()
    search = _net_plugin.PluginSearch(tree, environ, ldconfig_text, python_paths)
    plugin_setting = settings.get("NCCL_NET_PLUGIN", {}).get("value")
    data["nccl_plugins"] = _net_plugin.read_plugins(search, plugin_setting)
    timings["plugins"] = round(time.monotonic() - plugin_started, 4)
    all_netdevs = None
    if data["netdevs"] is not None:
        all_netdevs = natural_sorted(list(data["netdevs"]) + list(data["virtual_netdevs"] or []))
    data["settings_problems"] = _net_settings.resolve_settings(
        settings, devices, all_netdevs, data["nccl_plugins"]
    )
    data["nccl_settings"] = settings
    data["gid_index"] = _net_settings.gid_index_check(settings, devices)
    data["unreadable"] = sorted(set(tree.unreadable))
    timings["total"] = round(time.monotonic() - started, 4)
    data["timings_s"] = timings
    return data


def ldconfig_output(timeout_s: float) -> Optional[str]:
    """`ldconfig -p`, or None when ldconfig is absent or fails."""
    ran = _ldconfig.run_ldconfig(timeout_s)
    return ran[1] if ran is not None and ran[0] == 0 else None


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


if __name__ == "__main__":
    del sys.path[0]  # so that `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
