"""The one majority rule, shared by the cross-host diff and the checks' `uniform:` rules. Pure.

A value is the majority when more hosts report it than any other value (a plurality: 5 of 8 with
2 and 1 elsewhere). When two or more values tie for the most hosts there is none: the hosts are
*split* (two hosts that disagree are a 1–1 split), no side is "the majority" and no host is odd.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K")


@dataclass(frozen=True)
class Ranking(Generic[K]):
    """Values with the hosts that report each, most hosts first (ties in a stable order)."""

    groups: tuple[tuple[K, tuple[str, ...]], ...]

    @property
    def split(self) -> bool:
        """No value has more hosts than every other: no majority."""
        return len(self.groups) > 1 and len(self.groups[0][1]) == len(self.groups[1][1])

    @property
    def majority(self) -> tuple[K, tuple[str, ...]] | None:
        """The majority value and its hosts; None when the hosts are split (or none reported)."""
        return None if self.split or not self.groups else self.groups[0]


def rank(
    by_value: Mapping[K, Iterable[str]], order: Callable[[K], str] = repr, ordered: bool = False
) -> Ranking[K]:
    """Rank values by how many hosts report them; `order` only makes tied values' order stable
    (it never makes one of them the majority). `ordered`: each value's hosts come sorted."""
    hosts = {
        value: tuple(names) if ordered else tuple(sorted(names))
        for value, names in by_value.items()
    }
    ranked = sorted(hosts, key=lambda value: (-len(hosts[value]), order(value)))
    return Ranking(tuple((value, hosts[value]) for value in ranked))
