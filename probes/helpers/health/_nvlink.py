"""`nvidia-smi nvlink -s` (each link's speed, or inactive) and `nvidia-smi nvlink -e` (each link's
error counters), and a GPU's NVLink summary from both.

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). Pure, golden-tested through
tests/probes/test_health.py. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

NVLINK_GPU = re.compile(r"^GPU (\d+):.*?(?:\(UUID: (GPU-[0-9a-fA-F-]+)\))?\s*$")
NVLINK_LINK = re.compile(r"^\s*Link (\d+):\s*(.*?)\s*$")
NVLINK_COUNTER = re.compile(r"^\s*([A-Za-z][^:]*?)\s*:\s*(.*?)\s*$")
NVLINK_SPEED = re.compile(r"^([\d.]+)\s*GB/s$")
Parsed = Dict[str, Dict[str, Any]]  # gpu index -> {"uuid", "links": {link: ...}}


def _nvlink_blocks(text: str) -> List[Tuple[int, Optional[str], List[str]]]:
    """Split `nvidia-smi nvlink ...` output into (gpu index, uuid, its lines)."""
    blocks: List[Tuple[int, Optional[str], List[str]]] = []
    for line in text.splitlines():
        match = NVLINK_GPU.match(line.strip())
        if match:
            blocks.append((int(match.group(1)), match.group(2), []))
        elif blocks and line.strip():
            blocks[-1][2].append(line)
    return blocks


def parse_nvlink_status(text: str) -> Parsed:
    """`nvidia-smi nvlink -s` -> {gpu index: {"uuid", "links": {link: GB/s or None (inactive)}}}.
    A GPU without links (PCIe cards) has an empty "links"."""
    result: Parsed = {}
    for index, uuid, lines in _nvlink_blocks(text):
        links: Dict[str, Optional[float]] = {}
        for line in lines:
            match = NVLINK_LINK.match(line)
            if match:
                speed = NVLINK_SPEED.match(match.group(2))
                links[match.group(1)] = float(speed.group(1)) if speed else None
        result[str(index)] = {"uuid": uuid, "links": links}
    return result


def _counter_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def is_error_counter(name: str) -> bool:
    """Counters that mean a fault when non-zero: errors of any kind and failed recoveries (not
    packet or byte counts, successful recoveries, or error rates)."""
    if name.endswith("_ber") or "successful" in name:
        return False
    return "error" in name or "failed" in name


def _link_counters(lines: List[str]) -> Dict[str, Dict[str, Any]]:
    """One GPU's lines of `nvlink -e` -> {link: {counter: int or text}}."""
    links: Dict[str, Dict[str, Any]] = {}
    current: Optional[str] = None
    for line in lines:
        match = NVLINK_LINK.match(line)
        if match:
            current = match.group(1)
            links.setdefault(current, {})
            rest = match.group(2)
        elif current is not None:
            rest = line.strip()
        else:
            continue
        counter = NVLINK_COUNTER.match(rest) if rest else None
        if counter:
            raw = counter.group(2)
            links[current][_counter_name(counter.group(1))] = int(raw) if raw.isdigit() else raw
    return links


def parse_nvlink_errors(text: str) -> Parsed:
    """`nvidia-smi nvlink -e` -> {gpu index: {"uuid", "links": {link: {counter: int or text}}}}.
    Reads both layouts: `Link 0: Replay Errors: 0` and a `Link 0:` line with indented counters."""
    return {
        str(index): {"uuid": uuid, "links": _link_counters(lines)}
        for index, uuid, lines in _nvlink_blocks(text)
    }


def _error_totals(counters: Dict[str, Any]) -> Tuple[Dict[str, int], List[str]]:
    """Each error counter summed over the links, and the links with a non-zero one."""
    totals: Dict[str, int] = {}
    with_errors: List[str] = []
    for link in sorted(counters["links"], key=int):
        for name, value in sorted(counters["links"][link].items()):
            if isinstance(value, int) and is_error_counter(name):
                totals[name] = totals.get(name, 0) + value
                if value:
                    with_errors.append("link %s %s=%d" % (link, name, value))
    return totals, with_errors


def nvlink_for_gpu(
    gpu: Dict[str, Any], status: Optional[Parsed], errors: Optional[Parsed]
) -> Optional[Dict[str, Any]]:
    """The GPU's NVLink summary, matched by UUID (else by index); None when it has no links."""
    mine = _match_nvlink(gpu, status)
    if mine is None or not mine["links"]:
        return None
    links = mine["links"]
    down = sorted((int(link) for link, speed in links.items() if speed is None))
    counters = _match_nvlink(gpu, errors)
    totals: Optional[Dict[str, int]] = None
    with_errors: Optional[List[str]] = None
    if counters is not None:
        totals, with_errors = _error_totals(counters)
    return {
        "links": len(links),
        "active": len(links) - len(down),
        "down": down,
        "speeds_gbs": sorted(set(speed for speed in links.values() if speed is not None)),
        "error_totals": totals,
        "error_total": None if totals is None else sum(totals.values()),
        "links_with_errors": with_errors,
    }


def _match_nvlink(gpu: Dict[str, Any], parsed: Optional[Parsed]) -> Optional[Dict[str, Any]]:
    if parsed is None:
        return None
    for entry in parsed.values():
        if gpu.get("uuid") and entry.get("uuid") == gpu["uuid"]:
            return entry
    return parsed.get(str(gpu["index"]))
