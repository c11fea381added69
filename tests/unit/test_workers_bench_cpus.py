"""bench/workers_scale.py's CPU sets: the rig and fleet on disjoint CPUs, never two threads of
one physical core split between them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from workers_scale import format_cpus, parse_cpus, split_cpus


def hyperthreads(cores: int) -> dict[int, frozenset[int]]:
    """Linux's usual numbering: CPU i and i+cores are the two threads of core i."""
    return {cpu: frozenset({cpu % cores, cpu % cores + cores}) for cpu in range(2 * cores)}


def test_cpu_lists_read_and_write_as_taskset_does() -> None:
    assert parse_cpus("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert format_cpus({11, 0, 1, 2, 3, 8, 10}) == "0-3,8,10-11"
    assert format_cpus(parse_cpus("5")) == "5"


def test_fleet_gets_the_lower_half_and_the_rig_the_upper() -> None:
    fleet, rig, _ = split_cpus(range(16), lambda cpu: frozenset({cpu}))
    assert fleet == set(range(8))
    assert rig == set(range(8, 16))


def test_threads_of_one_core_stay_on_one_side() -> None:
    siblings = hyperthreads(8)
    fleet, rig, note = split_cpus(range(16), siblings.__getitem__)
    assert fleet == {0, 1, 2, 3, 8, 9, 10, 11}
    assert rig == {4, 5, 6, 7, 12, 13, 14, 15}
    assert "8 physical cores, 2 thread(s)" in note
    assert all(siblings[cpu] <= fleet or siblings[cpu] <= rig for cpu in range(16))


def test_two_cpus_are_one_each_even_as_threads_of_one_core() -> None:
    assert split_cpus({0, 1}, lambda cpu: frozenset({cpu}))[:2] == ({0}, {1})
    assert split_cpus({0, 1}, lambda cpu: frozenset({0, 1}))[:2] == ({0}, {1})


def test_one_cpu_cannot_be_split() -> None:
    with pytest.raises(SystemExit, match="--unpinned"):
        split_cpus({3})


def test_the_rig_given_more_cpus_keeps_fleet_on_three_eighths() -> None:
    fleet, rig, note = split_cpus(range(16), lambda cpu: frozenset({cpu}), fleet_share=3 / 8)
    assert fleet == set(range(6))
    assert rig == set(range(6, 16))
    assert "6 for fleet, 10 for the rig" in note
