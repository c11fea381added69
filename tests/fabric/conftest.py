"""Hosts in their own network namespaces for `fleet fabric`: each a real sshd with its own address
on a bridge, so every rank binds its own address and `tc` can slow one host or one link.

    root namespace: bridge fbr<N> 10.77.<N>.1/24
      └─ veth fv<N>h<i> ─── eth0 in namespace fab<N>-<i>, 10.77.<N>.<10+i>, sshd on :2200

Slowing a host: tbf on both ends of its veth (traffic to it and from it). Slowing one link: htb
on each of the two hosts' root-side veths, with a u32 filter on the other host's address. This
kernel has no netem; a rate limit is what makes busbw fall, which is what the blame reads.
Needs root (CI is root); skips with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.integration.conftest import farm, ssh_host, write_inventory
from tests.integration.sshd import SshdFarm

__all__ = ["farm"]

SSH_PORT = 2200


def sh(*args: str, netns: str | None = None, check: bool = True) -> str:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    done = subprocess.run([*prefix, *args], capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class NetnsFleet:
    """A bridge and N namespaced sshd hosts; `address(name)`, `slow_host`, `slow_link`."""

    farm: SshdFarm
    tag: str
    subnet: int
    hosts: dict[str, str] = field(default_factory=dict)  # name → namespace
    addresses: dict[str, str] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)  # root-side links to delete

    @property
    def bridge(self) -> str:
        return f"fbr{self.tag}"

    def up(self) -> None:
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        self.links.append(self.bridge)
        sh("ip", "addr", "add", f"10.77.{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")

    def add_host(self, index: int) -> str:
        name, netns = f"fab{self.tag}-{index}", f"fab{self.tag}-{index}"
        here, there = self.veth(name), f"fp{self.tag}h{index}"
        address = f"10.77.{self.subnet}.{10 + index}"
        sh("ip", "netns", "add", netns)
        self.hosts[name] = netns
        sh("ip", "link", "add", here, "type", "veth", "peer", "name", there)
        self.links.append(here)
        sh("ip", "link", "set", there, "netns", netns)
        sh("ip", "link", "set", here, "master", self.bridge, "up")
        sh("ip", "addr", "add", f"{address}/24", "dev", there, netns=netns)
        sh("ip", "link", "set", there, "up", netns=netns)
        sh("ip", "link", "set", "lo", "up", netns=netns)
        self.addresses[name] = address
        self.farm.start(name, address, prefix=("ip", "netns", "exec", netns))
        return name

    def veth(self, name: str) -> str:
        return f"fv{self.tag}h{name.rsplit('-', 1)[1]}"

    def inner_veth(self, name: str) -> str:
        return f"fp{self.tag}h{name.rsplit('-', 1)[1]}"

    def slow_host(self, name: str, rate: str) -> None:
        """tbf both ways: on the root side (traffic to the host) and inside (traffic from it)."""
        tbf = ("tbf", "rate", rate, "burst", "256kbit", "latency", "400ms")
        sh("tc", "qdisc", "add", "dev", self.veth(name), "root", *tbf)
        sh("tc", "qdisc", "add", "dev", self.inner_veth(name), "root", *tbf, netns=self.hosts[name])

    def slow_link(self, one: str, other: str, rate: str) -> None:
        """Only traffic between `one` and `other` is slow: each side's veth gets an htb whose
        slow class catches packets from the other host's address."""
        for to, source in ((one, other), (other, one)):
            dev = self.veth(to)
            sh("tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
            for classid, ceiling in (("1:10", "10gbit"), ("1:20", rate)):  # fast default, slow
                sh(*f"tc class add dev {dev} parent 1: classid {classid} htb".split(),
                   "rate", ceiling, "ceil", ceiling)  # fmt: skip
            match = f"u32 match ip src {self.addresses[source]}/32 flowid 1:20".split()
            sh(*f"tc filter add dev {dev} parent 1: protocol ip prio 1".split(), *match)

    def clear_shaping(self) -> None:
        for name, netns in self.hosts.items():
            sh("tc", "qdisc", "del", "dev", self.veth(name), "root", check=False)
            sh("tc", "qdisc", "del", "dev", self.inner_veth(name), "root", netns=netns, check=False)

    def pids_in(self, name: str) -> list[int]:
        """Every process in the host's namespace but its sshd: what fleet left behind."""
        listed = sh("ip", "netns", "pids", self.hosts[name], check=False).split()
        sshd = self.farm.hosts[name].process
        return [int(p) for p in listed if not sshd or int(p) != sshd.pid]

    def down(self) -> None:
        for name in self.hosts:
            host = self.farm.hosts.get(name)
            if host and host.process and host.process.poll() is None:
                host.process.kill()
                host.process.wait(5)
        for netns in self.hosts.values():
            for pid in sh("ip", "netns", "pids", netns, check=False).split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            sh("ip", "netns", "del", netns, check=False)
        for link in reversed(self.links):
            sh("ip", "link", "del", link, check=False)

    def inventory(
        self,
        tmp_path: Path,
        names: list[str],
        extra: dict[str, dict] | None = None,
        **defaults: object,
    ) -> Path:
        known = self.farm.known_hosts(tmp_path / "known_hosts", names)
        hosts = {n: ssh_host(self.farm, n) for n in names} | dict(extra or {})
        return write_inventory(tmp_path / "inv.yaml", self.farm, hosts, known, **defaults)


def can_make_namespaces() -> str | None:
    probe = f"fabprobe{uuid.uuid4().hex[:6]}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode:
        return done.stderr.strip() or "ip netns add failed"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


FLEETS_MADE = itertools.count()


@pytest.fixture
def netns_fleet(farm: SshdFarm) -> Iterator[NetnsFleet]:
    """Four namespaced sshd hosts on a bridge (add more with add_host)."""
    why = can_make_namespaces() if os.geteuid() == 0 else "not root"
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI must be able to create network namespaces: {why}")
        pytest.skip(f"fleet fabric's tests need network namespaces (root): {why}")
    pytest.importorskip("torch", reason="the ranks run torch.distributed (gloo on CPU)")
    tag = f"{os.getpid() % 1000}{next(FLEETS_MADE):02d}"  # unique names in this session
    fleet = NetnsFleet(farm, tag, subnet=os.getpid() % 200 + 20)
    try:
        fleet.up()
        for index in range(4):
            fleet.add_host(index)
        yield fleet
    finally:
        fleet.down()
