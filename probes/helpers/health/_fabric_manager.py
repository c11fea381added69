"""NVIDIA Fabric Manager, which an NVSwitch system needs before its GPUs can use NVLink: is its
service active (systemd, readable without root) and is it listening on its command port, 6666
(/proc/net/tcp and tcp6, as GPUd checks it: FM_CMD_PORT_NUMBER in the Fabric Manager user
guide). Only asked where NVSwitches are on the PCI bus.

Not a probe (the leading underscore): a helper the health probe ships (`SHIPS`) and imports by
module name. The parsers are pure; `read_fabric_manager` touches the host. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import shutil
import time
from typing import Any, Dict, Iterable, List, Optional, Set

import _host_io

SERVICE = "nvidia-fabricmanager.service"
COMMAND_PORT = 6666
PROC_NET_TCP = ("proc/net/tcp", "proc/net/tcp6")
TCP_LISTEN = "0A"
SYSTEMCTL_TIMEOUT_S = 3.0
SHOW_ARGS = ("show", "--property=LoadState,ActiveState,SubState", SERVICE)


def listening_ports(texts: Iterable[Optional[str]]) -> Optional[Set[int]]:
    """/proc/net/tcp and tcp6 -> the local ports in LISTEN state; None when none was readable."""
    ports: Set[int] = set()
    readable = False
    for text in texts:
        if text is None:
            continue
        readable = True
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and fields[3] == TCP_LISTEN and ":" in fields[1]:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports if readable else None


def parse_show(text: str) -> Dict[str, str]:
    """`systemctl show --property=...` -> {"LoadState": "loaded", "ActiveState": "active", ...}."""
    values: Dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line:
            name, value = line.split("=", 1)
            values[name.strip()] = value.strip()
    return values


def service_state(show: Optional[Dict[str, str]]) -> Optional[str]:
    """active / inactive / failed / activating …, "not-installed" where systemd has no such unit,
    None where systemd could not be asked."""
    if not show or "ActiveState" not in show:
        return None
    if show.get("LoadState") == "not-found":
        return "not-installed"
    return show["ActiveState"]


def fabric_manager(
    nvswitches: Optional[List[str]],
    show: Optional[Dict[str, str]],
    ports: Optional[Set[int]],
    service_why: Optional[str] = None,
) -> Dict[str, Any]:
    """The probe's `fabric_manager`. `running`: True when the service is active or the port
    listens (it may run in a container, outside systemd); False when the service is readable and
    not active and the port does not listen; None when that cannot be told (no systemd here and no
    port: another network namespace may hide it)."""
    state = service_state(show)
    listening = None if ports is None else COMMAND_PORT in ports
    if state == "active" or listening:
        running: Optional[bool] = True
    elif state is not None and listening is False:
        running = False
    else:
        running = None
    return {
        "nvswitches": None if nvswitches is None else len(nvswitches),
        "nvswitch_bus_ids": nvswitches,
        "service": state,
        "service_why": None if state is not None else service_why,
        "port_6666_listening": listening,
        "running": running,
    }


def read_fabric_manager(root: str, nvswitches: Optional[List[str]]) -> Dict[str, Any]:
    """Asks systemd and /proc only where NVSwitches are on the bus (elsewhere: not judged)."""
    if not nvswitches:
        return fabric_manager(nvswitches, None, None, "no NVSwitch on the PCI bus: not asked")
    texts = [_host_io.read("%s/%s" % (root.rstrip("/"), path)) for path in PROC_NET_TCP]
    systemctl = shutil.which("systemctl")
    if not systemctl:
        return fabric_manager(nvswitches, None, listening_ports(texts), "systemctl not found")
    proc = _host_io.start([systemctl, *SHOW_ARGS])
    rc, out, err = _host_io.finish(proc, time.monotonic() + SYSTEMCTL_TIMEOUT_S)
    show = parse_show(out) if rc == 0 else None
    return fabric_manager(nvswitches, show, listening_ports(texts), _host_io.why(rc, out, err))
