"""What the workers' seed reads once before it forks (SshTransports.prepared): each worker
connects with the known_hosts and identity files read there, never reading them again; a file
that cannot be loaded stays its hosts' own error, as in one process. And the workers' profiles
(FLEET_WORKER_PROFILE), how a worker's CPU is seen at all, and their timeline
(FLEET_WORKER_TIMELINE), what bench/workers_scale.py reads to say where a run's wall went."""

from __future__ import annotations

import asyncio
import json
import pstats
from dataclasses import replace
from pathlib import Path

import pytest

from fleet.errors import AuthError
from fleet.execution.workers import SshTransports
from fleet.models import Host
from tests.integration.conftest import run_fleet, ssh_host, write_inventory
from tests.integration.fleet_runs import ssh_target
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration


def connect_with(opener: SshTransports, prepared_for: list[Host], host: Host) -> str:
    """Prepare the transport for `prepared_for` (as the seed does), then connect to `host` in a
    fresh event loop (as a forked worker does); the server's key type, or the error's class."""
    transport = opener.prepared(prepared_for)

    async def connect() -> str:
        async with opener.open(None, transport) as transports:
            ssh = transports["ssh"]
            try:
                conn = await ssh.connect(host)  # type: ignore[attr-defined]
            except AuthError as exc:
                return type(exc).__name__
            conn.abort()
            return "connected"

    return asyncio.run(connect())


def test_a_worker_trusts_the_known_hosts_read_before_the_fork(
    farm: SshdFarm, tmp_path: Path
) -> None:
    farm.start("preload-known", "127.0.13.1")
    host = ssh_target(farm, "preload-known", tmp_path)
    opener = SshTransports(accept_new=False, fleet_known_hosts=tmp_path / "fleet_known_hosts")
    transport = opener.prepared([host])
    assert host.known_hosts is not None
    Path(host.known_hosts).write_text("")  # read again, it would trust no key at all

    async def connect() -> None:
        async with opener.open(None, transport) as transports:
            conn = await transports["ssh"].connect(host)  # type: ignore[attr-defined]
            conn.abort()

    asyncio.run(connect())  # no HostKeyUnknownError: the key read in the seed is trusted


def test_an_unreadable_identity_file_is_its_hosts_error_not_the_seeds(
    farm: SshdFarm, tmp_path: Path
) -> None:
    farm.start("preload-keys", "127.0.13.2")
    good = ssh_target(farm, "preload-keys", tmp_path)
    broken = replace(good, name="broken", identity_file=str(tmp_path / "no-such-key"))
    opener = SshTransports(accept_new=False, fleet_known_hosts=tmp_path / "fleet_known_hosts")
    assert connect_with(opener, [good, broken], broken) == "AuthError"
    assert connect_with(opener, [good, broken], good) == "connected"


def two_hosts(farm: SshdFarm, tmp_path: Path, prefix: str, first: int) -> tuple[list[str], Path]:
    """Two sshd hosts on 127.0.13.first and the next; their names, and an inventory of them."""
    names = [f"{prefix}-0", f"{prefix}-1"]
    for index, name in enumerate(names):
        farm.start(name, f"127.0.13.{first + index}")
    hosts = {n: ssh_host(farm, n) for n in names}
    known = farm.known_hosts(tmp_path / "known_hosts", names)
    return names, write_inventory(tmp_path / "inv.yaml", farm, hosts, known)


def test_each_worker_writes_its_cpu_profile_where_asked(farm: SshdFarm, tmp_path: Path) -> None:
    names, inventory = two_hosts(farm, tmp_path, "profiled", 10)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    args = ("probe", "-i", str(inventory), "-p", "system", "--workers", "2")
    done = run_fleet(tmp_path, *args, env={"FLEET_WORKER_PROFILE": str(profiles)})
    assert all(done.status(n) == "ok" for n in names), done.stderr
    written = sorted(p.name for p in profiles.iterdir())
    assert written == ["worker-0.prof", "worker-1.prof"]
    calls = pstats.Stats(str(profiles / "worker-0.prof")).stats
    assert any(function == "fan_out_in_worker" for _, _, function in calls)


def test_the_parent_the_seed_and_each_worker_write_their_stamps(
    farm: SshdFarm, tmp_path: Path
) -> None:
    """One line from the parent (its relay), one from the seed, one from each worker's fan-out,
    their hosts' finishing times on one clock."""
    names, inventory = two_hosts(farm, tmp_path, "stamped", 20)
    timeline = tmp_path / "timeline"
    args = ("probe", "-i", str(inventory), "-p", "system", "--workers", "2")
    done = run_fleet(tmp_path, *args, env={"FLEET_WORKER_TIMELINE": str(timeline)})
    assert all(done.status(n) == "ok" for n in names), done.stderr

    records = [json.loads(line) for line in timeline.read_text().splitlines()]
    by_role = {role: [r for r in records if r["role"] == role] for role in ("relay", "seed")}
    fanouts = [r for r in records if r["role"] == "fanout"]
    assert len(by_role["relay"]) == len(by_role["seed"]) == 1
    relay = by_role["relay"][0]
    assert len(relay["finished"]) == relay["hosts"] == 2
    assert sorted(relay["workers"].values()) == sorted(r["pid"] for r in fanouts)
    assert relay["marks"]["seed_starting"] <= by_role["seed"][0]["marks"]["forking"]
    for fanout in fanouts:
        assert fanout["hosts"] == len(fanout["finished"]) == 1
        assert fanout["started"] - 0.001 <= fanout["finished"][0] <= fanout["ended"] + 0.001  # 1 ms
        assert fanout["finished"][0] <= max(relay["finished"]) + 0.001  # then relayed
        assert fanout["waits_s"]["handshake"] > 0
