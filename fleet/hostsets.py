"""Host names folded into nodesets for every output: `gpu-01 gpu-02 gpu-03 gpu-05` → `gpu-[01-03,05]`.

The bottom floor: inventory, analysis, checks, transports and renderers all fold host lists the
same way, so the function lives below all of them (expanding nodesets is the inventory's job:
fleet.inventory.nodeset). ClusterShell's NodeSet folds, so what fleet prints is a nodeset that
fleet's -H and --limit, clush and pdsh all read back.

Folding 20,000 names is done often (every finding, cohort and verdict names its hosts), and
ClusterShell parses each name as a nodeset expression (~60 µs a name). A name of letters, `-`,
`_` and `.` with at most one run of digits is split here instead, with one regular expression,
into the same pattern and index ClusterShell's own parser makes of it (`gpu-%s`, `00017`); the
indices go into ClusterShell's RangeSet as the strings it stores, and ClusterShell folds and
prints them as always. Any other name (two runs of digits, brackets, `%`, …) is parsed by
ClusterShell as before. tests/unit/test_hostsets.py holds the two ways to the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ClusterShell.NodeSet import NodeSet

# prefix, the one run of digits (ClusterShell's index; none: a name without an index), suffix
SIMPLE_NAME = re.compile(r"([A-Za-z_.\-]*)([0-9]{0,64})([A-Za-z_.\-]*)")
# a name no nodeset syntax touches (fleet.inventory.nodeset reads the same ones as themselves)
PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def compact_hosts(names: Iterable[str]) -> str:
    """The inverse of expand_hostlist: gpu-01 gpu-02 gpu-03 gpu-05 h200-a → `gpu-[01-03,05],h200-a`,
    a nodeset that -H, --limit, clush and pdsh read back."""
    unique = tuple(sorted(set(names)))
    if len(unique) == 1 and PLAIN_NAME.fullmatch(unique[0]):
        return unique[0]  # one name folds to itself: no need to import ClusterShell for it
    folded = _FOLDED.get(unique)
    if folded is None:
        from ClusterShell.NodeSet import NodeSetException

        try:
            folded = str(_nodeset(unique))
        except NodeSetException:  # a name no nodeset can hold (from an old or edited run file)
            folded = ",".join(unique)
        if len(_FOLDED) >= MAX_FOLDED:
            _FOLDED.clear()
        _FOLDED[unique] = folded
    return folded


# Folds made lately: a report names the same few host lists (a cohort, the odd hosts) hundreds
# of times; each is folded once.
_FOLDED: dict[tuple[str, ...], str] = {}
MAX_FOLDED = 256


def _nodeset(names: Sequence[str]) -> NodeSet:
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetBase
    from ClusterShell.RangeSet import RangeSet

    indices: dict[str, list[str]] = {}
    bare: list[str] = []
    others: list[str] = []
    match = SIMPLE_NAME.fullmatch
    for name in names:
        found = match(name)
        if found is None:
            others.append(name)
            continue
        prefix, index, suffix = found.groups()
        if index:
            indices.setdefault(f"{prefix}%s{suffix}", []).append(index)
        elif name:
            bare.append(name)
        else:
            others.append(name)
    nodeset = NodeSet(resolver=RESOLVER_NOGROUP)
    for pattern, found_indices in indices.items():
        rangeset = RangeSet()
        set.update(rangeset, found_indices)  # ClusterShell ≥ 1.9 stores each index as its text
        nodeset.update(NodeSetBase(pattern, rangeset, copy_rangeset=False))
    for name in bare:
        nodeset.update(NodeSetBase(name, None, copy_rangeset=False))
    if others:
        nodeset.updaten(others)
    return nodeset


def count_hosts(number: int) -> str:
    """`1 host`, `2 hosts`: how every output counts hosts."""
    return f"{number} host" if number == 1 else f"{number} hosts"
