"""Nodesets: `gpu-[01-08,10]` expanded to names, and names folded back, the same way everywhere
(inventory names, --limit, -H and every output).

ClusterShell's NodeSet (what `clush -w` and `nodeset -f` use) does the parsing and the folding, so a
folded name that fleet prints is a nodeset that fleet, clush and pdsh all read back. fleet adds the
error messages (file:line, the part that is wrong, the fix) and a size check made before parsing:
ClusterShell builds every name of `x[1-9999999]` before it could be counted.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fleet.errors import FleetError, InventoryError
from fleet.hostsets import PLAIN_NAME  # a name with nothing for a nodeset to expand
from fleet.yamlfile import Location

if TYPE_CHECKING:
    from ClusterShell.NodeSet import NodeSetException

RANGE_RE = re.compile(r"\[([^\[\]]*)\]")
MAX_RANGE_HOSTS = 100_000
RANGE_HINT = (
    "write ranges like gpu-[01-08] or node[1,3,5-7] (widths must match: gpu-[001-999,1000])"
)


def expand_hostlist(pattern: str, here: Location | None = None) -> list[str]:
    """`gpu-[01-03,07]` → gpu-01 gpu-02 gpu-03 gpu-07; several brackets multiply out
    (`rack[1-2]-gpu[01-04]`), commas outside brackets list several (`gpu[1-2],login1`)."""
    if PLAIN_NAME.fullmatch(pattern):
        return [pattern]  # one name: what ClusterShell would say, without importing it
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

    _check_brackets(pattern, here)
    if _estimated_size(pattern) > MAX_RANGE_HOSTS:
        raise _range_error(pattern, f"expands to more than {MAX_RANGE_HOSTS} hosts", here)
    try:
        nodes = NodeSet(_split_widths(pattern), resolver=RESOLVER_NOGROUP)
    except NodeSetException as exc:
        raise _range_error(pattern, _why(pattern, exc), here) from exc
    names = list(nodes)
    if not names:
        raise _range_error(pattern, "names no host", here)
    return names


def split_top_level(text: str) -> list[str]:
    """`gpu-[01,03],!login1` → ['gpu-[01,03]', '!login1']: commas inside brackets stay."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _check_brackets(pattern: str, here: Location | None) -> None:
    depth = 0
    for char in pattern:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            break
    if depth != 0:
        raise _range_error(pattern, "unbalanced brackets", here)
    for body in RANGE_RE.findall(pattern):
        _check_range_body(body, pattern, here)


def _check_range_body(body: str, pattern: str, here: Location | None) -> None:
    """fleet's own words for the mistakes people make; ClusterShell reports the rest."""
    for part in body.split(","):
        start, dash, end = part.strip().partition("-")
        if not start.isdigit() or (dash and not end.isdigit()):
            raise _range_error(pattern, f"{part!r} is not N or N-M", here)
        if dash and int(end) < int(start):
            raise _range_error(pattern, f"range {part!r} runs backwards", here)


def _split_widths(pattern: str) -> str:
    """Slurm reads `gpu-[001-1000]` as gpu-001 … gpu-999, gpu-1000; ClusterShell wants one width
    per range: hand it `gpu-[001-999,1000]`, the same names."""
    return RANGE_RE.sub(
        lambda m: "[" + ",".join(map(_split_range, m.group(1).split(","))) + "]", pattern
    )


def _split_range(item: str) -> str:
    start, _, end = item.strip().partition("-")
    if not end or not start.startswith("0") or len(end) <= len(start):
        return item.strip()
    pieces, low = [], int(start)
    for width in range(len(start), len(end) + 1):
        high = min(int(end), 10**width - 1)
        if low <= high:
            first, last = str(low).zfill(width), str(high).zfill(width)
            pieces.append(first if low == high else f"{first}-{last}")
        low = max(low, high + 1)
    return ",".join(pieces)


def _estimated_size(pattern: str) -> int:
    """How many names `pattern` names at most, counted from its bracket bodies alone."""
    total = 0
    for part in split_top_level(pattern):
        size = 1
        for body in RANGE_RE.findall(part):
            size *= sum(_range_length(item) for item in body.split(","))
        total += size
    return total


def _range_length(item: str) -> int:
    start, _, end = item.strip().partition("-")
    if not end:
        return 1
    return max(1, int(end) - int(start) + 1)  # bodies are checked to be N or N-M first


def _why(pattern: str, exc: NodeSetException) -> str:
    reason = str(getattr(exc, "part", "") or exc).replace('"', "'")
    if "padding length mismatch" in reason:
        return f"{reason}: a range keeps one width"
    return reason


def _range_error(pattern: str, why: str, here: Location | None) -> FleetError:
    message = f"host range {pattern!r}: {why}"
    return here.fail(message, hint=RANGE_HINT) if here else InventoryError(message, hint=RANGE_HINT)
