"""fleet.hostsets.compact_hosts: names it splits itself fold exactly as ClusterShell's own parse
of every name folds them (the way it folded all names before)."""

from __future__ import annotations

import random
import string

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException, ParsingEngine

from fleet.hostsets import compact_hosts
from fleet.inventory.nodeset import expand_hostlist


def parsed_by_clustershell(names: list[str]) -> str:
    unique = sorted(set(names))
    try:
        return str(NodeSet.fromlist(unique, resolver=RESOLVER_NOGROUP))
    except NodeSetException:
        return ",".join(unique)


def random_name(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:  # one run of digits, padded or not, with a prefix and maybe a suffix
        digits = str(rng.randint(0, 1200)).zfill(rng.choice([0, 1, 2, 3, 4, 5]))
        return (
            rng.choice(["gpu-", "n", "", "node", "h200-", "a.b_"])
            + digits
            + rng.choice(["", "-ib", "a", ".example"])
        )
    if kind < 0.65:  # two runs of digits: ClusterShell's own parser
        return f"{rng.choice(['r', 'rack', 'h'])}{rng.randint(0, 30)}-n{rng.randint(0, 9):0{rng.choice([1, 2])}d}"
    return "".join(rng.choice("ab-_.9%[]@ ,x0Z") for _ in range(rng.randint(1, 8)))


def test_folds_as_clustershell_parses() -> None:
    rng = random.Random(25)
    for _ in range(3000):
        names = [random_name(rng) for _ in range(rng.randint(0, 40))]
        assert compact_hosts(names) == parsed_by_clustershell(names), names


def test_known_folds() -> None:
    assert (
        compact_hosts(["gpu-01", "gpu-02", "gpu-03", "gpu-05", "h200-a"]) == "gpu-[01-03,05],h200-a"
    )
    assert compact_hosts(["n9", "n10", "n08", "n010"]) == "n[9,08,10,010]"
    assert compact_hosts(["r1-n01", "r1-n02", "r2-n01"]) == "r1-n[01-02],r2-n01"
    assert compact_hosts([]) == ""


def test_simple_names_are_not_parsed_one_by_one(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    parses = []
    parse = ParsingEngine.parse_string

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        parses.append(args[0])
        return parse(self, *args, **kwargs)

    monkeypatch.setattr(ParsingEngine, "parse_string", counted)
    assert compact_hosts(f"gpu-{i:05d}" for i in range(2000)) == "gpu-[00000-01999]"
    assert parses == []
    assert compact_hosts(["r1-n01", "gpu-7"]) == "gpu-7,r1-n01"
    assert parses == ["r1-n01"]


def test_a_plain_name_reads_and_folds_as_clustershell_reads_and_folds_it() -> None:
    """One name with nothing for a nodeset to expand is taken as itself without ClusterShell
    (fleet.hostsets.PLAIN_NAME): the same answer ClusterShell gives, both ways."""
    rng = random.Random(45)
    alphabet = string.ascii_letters + string.digits + "_.-"
    names = ["gpu-01", "h200", "a.b.c", "node007x", "-", "0", "x--1", "007"]
    names += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(500)]
    for name in names:
        nodes = NodeSet(name, resolver=RESOLVER_NOGROUP)
        assert compact_hosts([name]) == str(nodes), name
        assert expand_hostlist(name) == list(nodes), name
