"""The report's health section: one column per GPU, one row per group of hosts whose GPUs read
alike. The cells show the readings the health rules judge (uncorrected ECC, row remapping, active
hardware slowdowns, the PCIe link against its max, XIDs since boot), highlighted where off; the
verdicts themselves stay in the checks section, so the two never disagree.

Hosts whose health reads the same fold into one row (`gpu-[001-998]`), so 20,000 healthy hosts
are one row and the two sick ones stand out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleet.models import HostOutcome
from fleet.render.html.markup import esc, hosts_label, row, table

if TYPE_CHECKING:
    from fleet.render.html.page import Report

ANCHOR = "health"
NAV = "GPU health"
TITLE = "GPU health"
INTRO = ""

Cell = tuple[str, bool]  # (text, off)


def shown(report: Report) -> bool:
    return has_health(report.run.hosts.values())


def body(report: Report) -> str | None:
    return health_section(list(report.run.hosts.values()))


def health_section(outcomes: Sequence[HostOutcome]) -> str | None:
    """None when no host ran the health probe with GPUs to report."""
    rows: dict[tuple[Any, ...], list[str]] = {}
    widest = 0
    for outcome in outcomes:
        data = _health_data(outcome)
        if data is None:
            continue
        cells = tuple(gpu_cell(gpu) for gpu in data.get("gpus") or [])
        key = (xid_cell(data), cells)
        rows.setdefault(key, []).append(outcome.name)
        widest = max(widest, len(cells))
    if not rows:
        return None
    ordered = sorted(rows.items(), key=lambda item: (not _any_off(item[0]), -len(item[1])))
    headers = ["hosts", "kernel log", *[f"GPU{i}" for i in range(widest)]]
    body = [_row(hosts, key, widest) for key, hosts in ordered]
    return table(headers, body)


def has_health(outcomes: Iterable[HostOutcome]) -> bool:
    return any(_health_data(outcome) is not None for outcome in outcomes)


def _health_data(outcome: HostOutcome) -> Mapping[str, Any] | None:
    result = outcome.probes.get("health")
    if result is None or not result.ok or not isinstance(result.data, Mapping):
        return None
    return result.data if result.data.get("gpus") else None


def _any_off(key: tuple[Any, ...]) -> bool:
    xid, cells = key
    return bool(xid[1]) or any(off for _, off in cells)


def _row(hosts: list[str], key: tuple[Any, ...], widest: int) -> str:
    xid, cells = key
    padded = [*cells, *[("", False)] * (widest - len(cells))]
    markup = [hosts_label(hosts), _cell(xid), *[_cell(c) for c in padded]]
    return row(markup, key=" ".join(hosts[:50]))


def _cell(cell: Cell) -> str:
    text, off = cell
    return f'<span class="{"chip bad" if off else "ok"}">{esc(text)}</span>' if text else ""


def gpu_cell(gpu: Mapping[str, Any]) -> Cell:
    """One GPU's readings in a few words: what is off first, `ok` when nothing is."""
    problems = [p for p in (_ecc(gpu), _remap(gpu), _slowdown(gpu), _pcie(gpu)) if p]
    if problems:
        return "; ".join(problems), True
    link = gpu.get("pcie") or {}
    return f"ok · PCIe Gen{link.get('gen', '?')} x{link.get('width', '?')}", False


def _ecc(gpu: Mapping[str, Any]) -> str:
    volatile = ((gpu.get("ecc") or {}).get("volatile")) or {}
    uncorrected = volatile.get("uncorrected")
    return f"ECC uncorrected {uncorrected}" if isinstance(uncorrected, int) and uncorrected else ""


def _remap(gpu: Mapping[str, Any]) -> str:
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure"):
        return "row remap failed"
    return "row remap pending" if rows.get("pending") else ""


def _slowdown(gpu: Mapping[str, Any]) -> str:
    events = gpu.get("clock_events") or {}
    hardware = [name for name in events.get("active") or [] if name.startswith("hw_")]
    return "slowed: " + ", ".join(hardware) if hardware else ""


def _pcie(gpu: Mapping[str, Any]) -> str:
    link = gpu.get("pcie") or {}
    width, widest = link.get("width"), link.get("width_max")
    if isinstance(width, int) and isinstance(widest, int) and width < widest:
        return f"PCIe x{width} of x{widest}"
    return ""


def xid_cell(data: Mapping[str, Any]) -> Cell:
    log = data.get("kernel_log") or {}
    if not log.get("readable"):
        return "not readable", False
    counts = log.get("xid_counts") or {}
    if not counts:
        return "no XID", False
    return "XID " + ", ".join(f"{xid}×{n}" for xid, n in sorted(counts.items())), True
