"""`fleet fabric --pairs isolate --backend gloo` on real sshd hosts in network namespaces: a host
slowed with tbf, a link slowed with htb + u32, two slow hosts, no fault. Each time exactly the bad
ones are named, in at most 10 rounds (`--pairs all`: 15 at 16 hosts), no fault in at most 2, and
nothing is left running.

Hosts: 16 (issue 41), or FLEET_ISOLATE_HOSTS (e.g. 8 on a loaded 2-core machine).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fabric.conftest import NetnsFleet
from tests.fabric.netns_helpers import TOLERANCE, assert_nothing_left, fabric, measured

pytestmark = [pytest.mark.faults, pytest.mark.torch, pytest.mark.slow]

HOSTS = int(os.environ.get("FLEET_ISOLATE_HOSTS", "16"))
RATE = "60mbit"


def grown(fleet: NetnsFleet) -> list[str]:
    for index in range(len(fleet.hosts), HOSTS):
        fleet.add_host(index)
    return list(fleet.hosts)


@pytest.mark.parametrize("fault", ["slow_host", "slow_link", "two_slow_hosts", "none"])
def test_isolate_names_exactly_the_bad_ones(
    netns_fleet: NetnsFleet, tmp_path: Path, fault: str
) -> None:
    names = grown(netns_fleet)
    # hosts 0 and 1 are ring neighbours in the first screen group in inventory or sorted order
    expected = {
        "slow_host": [("host", [names[5]])],
        "slow_link": [("link", sorted(names[:2]))],
        "two_slow_hosts": [("host", [names[2]]), ("host", [names[HOSTS - 3]])],
        "none": [],
    }[fault]
    for kind, ends in expected:
        if kind == "host":
            netns_fleet.slow_host(ends[0], RATE)
        else:
            netns_fleet.slow_link(ends[0], ends[1], RATE)
    inventory = netns_fleet.inventory(tmp_path, names)
    document = fabric(tmp_path, inventory, "--pairs", "isolate", *TOLERANCE, timeout=600)
    section = document["fabric"]
    found = sorted((s["kind"], sorted(s["hosts"])) for s in section["suspects"])
    assert found == sorted(expected), measured(document)
    assert section["isolate"]["rounds"] <= (10 if expected else 2), measured(document)
    assert section["isolate"]["pairs_all"]["rounds"] == HOSTS - 1
    for _, ends in expected:
        assert ends[0] in document["_stdout"]
    assert_nothing_left(netns_fleet)
