"""Host names folded into nodesets for every output: `gpu-01 gpu-02 gpu-03 gpu-05` → `gpu-[01-03,05]`.

The bottom floor: inventory, analysis, checks, transports and renderers all fold host lists the
same way, so the function lives below all of them (expanding nodesets is the inventory's job:
fleet.inventory.nodeset). ClusterShell's NodeSet folds, so what fleet prints is a nodeset that
fleet's -H and --limit, clush and pdsh all read back.
"""

from __future__ import annotations

from collections.abc import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException


def compact_hosts(names: Iterable[str]) -> str:
    """The inverse of expand_hostlist: gpu-01 gpu-02 gpu-03 gpu-05 h200-a → `gpu-[01-03,05],h200-a`,
    a nodeset that -H, --limit, clush and pdsh read back."""
    unique = sorted(set(names))
    try:
        return str(NodeSet.fromlist(unique, resolver=RESOLVER_NOGROUP))
    except NodeSetException:  # a name no nodeset can hold (from an old or edited run file)
        return ",".join(unique)


def count_hosts(number: int) -> str:
    """`1 host`, `2 hosts`: how every output counts hosts."""
    return f"{number} host" if number == 1 else f"{number} hosts"
