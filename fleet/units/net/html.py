"""The report's network section, in the manner of `fleet hosts`: one row per group of hosts whose
network reads alike, one column per RDMA port any of them has (device/port), each cell the port's
state and rate, then the NCCL plugin NCCL would load and whether GPUDirect RDMA is possible. A port
that is not ACTIVE, a device a host lacks, a setting that names nothing are highlighted; the
verdicts stay in the checks section (the net-* rules), so the two never disagree.

Hosts that read alike fold into one row (`gpu-[001-998]`); hosts without RDMA devices read as one
row too ("no RDMA devices")."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleet.models import HostOutcome
from fleet.render.html.markup import esc, hosts_label, row, table

if TYPE_CHECKING:
    from fleet.render.html.page import Report

ANCHOR = "network"
NAV = "network"
TITLE = "network"
INTRO = "each RDMA port's state and rate, the NCCL net plugin, GPUDirect RDMA"

Cell = tuple[str, bool]  # (text, off)
MISSING: Cell = ("missing", True)


def shown(report: Report) -> bool:
    return has_net(report.run.hosts.values())


def body(report: Report) -> str | None:
    return net_section(list(report.run.hosts.values()))


def net_section(outcomes: Sequence[HostOutcome]) -> str | None:
    """None when no host ran the net probe."""
    readings = {o.name: data for o in outcomes if (data := _net_data(o)) is not None}
    if not readings:
        return None
    ports = _natural(
        {
            f"{device}/{port}"
            for data in readings.values()
            for device, found in (_devices(data) or {}).items()
            for port in (found.get("ports") or {})
        }
    )
    rows: dict[tuple[Cell, ...], list[str]] = {}
    for name, data in readings.items():
        rows.setdefault(_cells(data, ports), []).append(name)
    ordered = sorted(
        rows.items(), key=lambda item: (not any(off for _, off in item[0]), -len(item[1]))
    )
    headers = ["hosts", *(ports or ["RDMA"]), "NCCL net plugin", "GPUDirect RDMA", "settings"]
    return table(headers, [_row(hosts, cells) for cells, hosts in ordered])


def has_net(outcomes: Iterable[HostOutcome]) -> bool:
    return any(_net_data(outcome) is not None for outcome in outcomes)


def _net_data(outcome: HostOutcome) -> Mapping[str, Any] | None:
    result = outcome.probes.get("net")
    if result is None or not result.ok or not isinstance(result.data, Mapping):
        return None
    return result.data


def _devices(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    devices = (data.get("rdma") or {}).get("devices")
    return devices if isinstance(devices, Mapping) else None


def _cells(data: Mapping[str, Any], ports: Sequence[str]) -> tuple[Cell, ...]:
    devices = _devices(data)
    if devices is None:
        port_cells: list[Cell] = [("not readable", True)] * max(len(ports), 1)
    elif not ports:
        port_cells = [("no RDMA devices", False)]
    else:
        port_cells = [port_cell(devices, label) for label in ports]
    return (*port_cells, plugin_cell(data), gpudirect_cell(data), settings_cell(data))


def port_cell(devices: Mapping[str, Any], label: str) -> Cell:
    device, _, number = label.rpartition("/")
    port = ((devices.get(device) or {}).get("ports") or {}).get(number)
    if port is None:
        return MISSING
    rate = port.get("rate_gbps")
    speed = f" {rate:g} Gb/s" if isinstance(rate, (int, float)) else ""
    if port.get("state") != "ACTIVE":
        return f"{port.get('state') or 'state unreadable'} ({port.get('phys_state')})", True
    return f"ACTIVE{speed} {port.get('link_layer') or ''}".strip(), False


def plugin_cell(data: Mapping[str, Any]) -> Cell:
    plugins = data.get("nccl_plugins") or {}
    loads = plugins.get("loads")
    if not loads:
        return "none", False
    return f"{loads.get('kind') or 'unknown'} {loads.get('version') or ''}".strip(), False


def gpudirect_cell(data: Mapping[str, Any]) -> Cell:
    gdr = data.get("gpudirect_rdma") or {}
    possible = gdr.get("possible")
    if possible is None:
        return "unknown", True
    return (f"yes ({gdr.get('via')})", False) if possible else ("no", False)


def settings_cell(data: Mapping[str, Any]) -> Cell:
    problems = data.get("settings_problems")
    if problems is None:
        return "not judged", True
    if problems:
        return "; ".join(p.split(" (")[0] for p in problems), True  # NAME=value of each
    return "ok", False


def _row(hosts: list[str], cells: tuple[Cell, ...]) -> str:
    return row([hosts_label(hosts), *[_cell(c) for c in cells]], key=" ".join(hosts[:50]))


def _cell(cell: Cell) -> str:
    text, off = cell
    return f'<span class="{"chip bad" if off else "ok"}">{esc(text)}</span>' if text else ""


def _natural(names: Iterable[str]) -> list[str]:
    return sorted(
        names, key=lambda n: [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", n)]
    )
