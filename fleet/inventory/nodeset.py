"""Nodesets: `gpu-[01-08,10]` expanded to names, and names folded back, the same way everywhere
(inventory names, --limit, -H and every output)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from fleet.errors import FleetError, InventoryError
from fleet.yamlfile import Location

RANGE_RE = re.compile(r"\[([^\[\]]*)\]")
MAX_RANGE_HOSTS = 100_000


def expand_hostlist(pattern: str, here: Location | None = None) -> list[str]:
    """`gpu-[01-03,07]` → gpu-01 gpu-02 gpu-03 gpu-07; several brackets multiply out."""
    match = RANGE_RE.search(pattern)
    if not match:
        if "[" in pattern or "]" in pattern:
            raise _range_error(pattern, "unbalanced brackets", here)
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    names = []
    for item in _expand_range(match.group(1), pattern, here):
        names.extend(expand_hostlist(head + item + tail, here))
        if len(names) > MAX_RANGE_HOSTS:
            raise _range_error(pattern, f"expands to more than {MAX_RANGE_HOSTS} hosts", here)
    return names


def _expand_range(body: str, pattern: str, here: Location | None) -> list[str]:
    items: list[str] = []
    for part in body.split(","):
        start, dash, end = part.strip().partition("-")
        if not start.isdigit() or (dash and not end.isdigit()):
            raise _range_error(pattern, f"{part!r} is not N or N-M", here)
        if not dash:
            items.append(start)
            continue
        if int(end) < int(start):
            raise _range_error(pattern, f"range {part!r} runs backwards", here)
        width = len(start) if start.startswith("0") else 0
        items.extend(str(i).zfill(width) for i in range(int(start), int(end) + 1))
    return items


def _range_error(pattern: str, why: str, here: Location | None) -> FleetError:
    message = f"host range {pattern!r}: {why}"
    hint = "write ranges like gpu-[01-08] or node[1,3,5-7]"
    return here.fail(message, hint=hint) if here else InventoryError(message, hint=hint)


NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")


def compact_hosts(names: Iterable[str]) -> str:
    """The inverse of expand_hostlist: gpu-01 gpu-02 gpu-03 gpu-05 h200-a → `gpu-[01-03,05], h200-a`."""
    numbered: dict[tuple[str, str], list[str]] = {}
    plain: list[str] = []
    for name in sorted(set(names)):
        match = NUMBERED.match(name)
        if match:
            prefix, digits, suffix = match.groups()
            numbered.setdefault((prefix, suffix), []).append(digits)
        else:
            plain.append(name)
    series: dict[tuple[str, int, str], list[int]] = {}
    for (prefix, suffix), all_digits in numbered.items():
        padded = {len(d) for d in all_digits if d.startswith("0") and len(d) > 1}
        for digits in all_digits:
            width = _series_width(digits, padded)
            series.setdefault((prefix, width, suffix), []).append(int(digits))
    parts = [_compact_series(key, numbers) for key, numbers in sorted(series.items())]
    return ", ".join(sorted(parts + plain))


def _series_width(digits: str, padded: set[int]) -> int:
    """The zero-padded width `digits` belongs to: gpu-100 joins gpu-001's series (width 3),
    gpu-5 does not (it would print as gpu-005)."""
    if digits.startswith("0") and len(digits) > 1:
        return len(digits)
    fitting = [width for width in padded if width <= len(digits)]
    return max(fitting) if fitting else 0


def _compact_series(key: tuple[str, int, str], numbers: list[int]) -> str:
    prefix, width, suffix = key
    if len(numbers) == 1:
        return f"{prefix}{str(numbers[0]).zfill(width)}{suffix}"
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    text = ",".join(
        str(r[0]).zfill(width) + (f"-{str(r[-1]).zfill(width)}" if len(r) > 1 else "") for r in runs
    )
    return f"{prefix}[{text}]{suffix}"
