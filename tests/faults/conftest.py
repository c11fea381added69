"""The fault suite's tools: hosts that vanish, links that crawl, servers that never say hello,
a controller run we can signal mid-flight, and checks that nothing is left on a probed host.

Built on tests/integration (the sshd farm, inventories, `python -m fleet` as a user runs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.integration.conftest import (
    FleetResult,
    farm,
    fleet_invocation,
    fleet_result,
    ssh_host,
    write_inventory,
)
from tests.integration.sshd import SshdFarm

__all__ = ["farm"]  # the session's sshd farm, shared with tests/integration

# ------------------------------------------------------------------------------ the controller


@dataclass
class Controller:
    """`python -m fleet ...` running in the background: signal it, watch its memory, finish it."""

    tmp_path: Path
    process: subprocess.Popen[str]
    peak_rss_kib: int = 0
    _watcher: threading.Thread | None = None
    _done: threading.Event = field(default_factory=threading.Event)

    def watch_memory(self) -> None:
        """Keep the controller's VmHWM (peak resident memory) while it runs."""

        def poll() -> None:
            while not self._done.is_set() and self.process.poll() is None:
                self.peak_rss_kib = max(self.peak_rss_kib, vm_hwm_kib(self.process.pid))
                time.sleep(0.05)

        self._watcher = threading.Thread(target=poll, daemon=True)
        self._watcher.start()

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def finish(self, timeout: float = 120) -> FleetResult:
        try:
            stdout, stderr = self.process.communicate(timeout=timeout)
        finally:
            self._done.set()
            if self.process.poll() is None:
                self.process.kill()
        return fleet_result(self.tmp_path, self.process.returncode, stdout, stderr)


def start_fleet(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, watch_memory: bool = False
) -> Controller:
    command, full_env = fleet_invocation(tmp_path, args, env)
    process = subprocess.Popen(
        command,
        env=full_env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,  # no prompt may ever wait on a terminal
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    controller = Controller(tmp_path, process)
    if watch_memory:
        controller.watch_memory()
    return controller


def vm_hwm_kib(pid: int) -> int:
    """VmHWM from /proc/PID/status: the peak resident set size, in KiB (0 once it is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


# ------------------------------------------------------------------------ processes on a host


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`: for a farm host, its sessions, runners and probes."""
    found, frontier = [], [pid]
    while frontier:
        children = [c for p in frontier for c in children_of(p)]
        found += children
        frontier = children
    return found


def host_processes(farm: SshdFarm, name: str) -> list[int]:
    process = farm.hosts[name].process
    assert process is not None
    return descendants(process.pid)


def wait_until(predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


def assert_nothing_left(farm: SshdFarm, name: str, marker: str | None = None) -> None:
    """No session, runner or probe of `name` survives (and `pgrep -f MARKER` finds nothing)."""
    assert wait_until(lambda: not host_processes(farm, name), 10), (
        f"left running on {name}: {[_cmdline(p) for p in host_processes(farm, name)]}"
    )
    if marker:
        pgrep = lambda: subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)  # noqa: E731
        assert wait_until(lambda: pgrep().stdout.strip() == "", 10), f"pgrep -f {marker}"


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return "?"


def signal_all(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


# --------------------------------------------------------------------------- hosts, inventories


@pytest.fixture
def fresh_host(farm: SshdFarm) -> Callable[..., str]:
    """Start a fresh sshd host with a unique name on its own 127.0.6x.y address."""

    def start(prefix: str = "host", set_env: dict[str, str] | None = None, **options: str) -> str:
        index = len(farm.hosts) + 1
        name = f"{prefix}-{index}"
        farm.start(name, f"127.0.{60 + index // 250}.{index % 250 + 1}", set_env, **options)
        return name

    return start


def inventory_for(
    farm: SshdFarm,
    tmp_path: Path,
    names: Sequence[str],
    extra: dict[str, dict[str, Any]] | None = None,
    **defaults: Any,
) -> Path:
    """An inventory of farm hosts (all keys known) plus `extra` hand-written hosts."""
    known = farm.known_hosts(tmp_path / "known_hosts", list(names))
    hosts = {n: ssh_host(farm, n) for n in names} | dict(extra or {})
    return write_inventory(tmp_path / "inv.yaml", farm, hosts, known, **defaults)


@pytest.fixture(autouse=True)
def nothing_written_on_hosts(farm: SshdFarm, tmp_path: Path) -> Iterator[None]:
    """After any run: no new file on any probed host (`find -newer` over its HOME and TMPDIR)."""
    marker = tmp_path / ".started"
    marker.touch()
    time.sleep(0.01)
    yield
    for host in farm.hosts.values():
        found = subprocess.run(
            ["find", str(host.home), "-newer", str(marker)], capture_output=True, text=True
        ).stdout.split()
        assert [f for f in found if f != str(host.home)] == [], f"new files on {host.name}"


# ------------------------------------------------------------------------- network misbehaviour


class NetFaults:
    """Loopback servers that misbehave, on one asyncio loop in a background thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers: list[asyncio.base_events.Server] = []
        self.held: list[asyncio.StreamWriter] = []

    def _serve(self, handler: Callable[..., Any], address: str) -> tuple[str, int]:
        async def start() -> asyncio.base_events.Server:
            return await asyncio.start_server(handler, address, 0)

        server = asyncio.run_coroutine_threadsafe(start(), self.loop).result(5)
        self.servers.append(server)
        return address, int(server.sockets[0].getsockname()[1])

    def silent(self, address: str = "127.0.0.1") -> tuple[str, int]:
        """Accepts TCP connections and never sends an SSH banner."""

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.held.append(writer)
            await reader.read()  # hold it open until the client gives up

        return self._serve(handler, address)

    def garbage(self, address: str = "127.0.0.1") -> tuple[str, int]:
        """Answers with bytes that are no SSH banner, and keeps talking nonsense."""

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.held.append(writer)
            with contextlib.suppress(OSError):
                writer.write(b"HTTP/1.1 400 Bad Request\r\n\xff\xfe\x00garbage\r\n")
                for _ in range(200):
                    writer.write(os.urandom(64) + b"\r\n")
                    await writer.drain()
                    await asyncio.sleep(0.05)

        return self._serve(handler, address)

    def slow_proxy(
        self, target: tuple[str, int], delay_s: float, address: str = "127.0.0.1"
    ) -> tuple[str, int]:
        """A TCP proxy that holds every chunk `delay_s` in each direction (this kernel: no netem)."""

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while chunk := await reader.read(65536):
                    await asyncio.sleep(delay_s)
                    writer.write(chunk)
                    await writer.drain()
            writer.close()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection(*target)
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        return self._serve(handler, address)

    def close(self) -> None:
        async def stop() -> None:
            for writer in self.held:
                writer.close()
            for server in self.servers:
                server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def net() -> Iterator[NetFaults]:
    faults = NetFaults()
    yield faults
    faults.close()


def _ip(*args: str, netns: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run([*prefix, "ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="session")
def black_hole() -> Iterator[str]:
    """An address whose packets vanish: a veth into a network namespace whose end is down, with
    a permanent neighbour entry so not even ARP answers. SYNs to it are dropped silently."""
    netns = f"fleet-bh-{uuid.uuid4().hex[:6]}"
    here, there = f"fbh{os.getpid() % 100000}", f"fbn{os.getpid() % 100000}"
    try:
        _ip("netns", "add", netns)
    except (OSError, subprocess.CalledProcessError) as exc:
        reason = getattr(exc, "stderr", "") or str(exc)
        if os.environ.get("CI"):
            pytest.fail(f"CI must be able to create network namespaces: {reason}")
        pytest.skip(f"cannot create a network namespace here (ip netns add: {reason.strip()})")
    try:
        _ip("link", "add", here, "type", "veth", "peer", "name", there)
        _ip("link", "set", there, "netns", netns)
        _ip("addr", "add", "10.213.7.1/30", "dev", here)
        _ip("link", "set", here, "up")
        _ip("addr", "add", "10.213.7.2/30", "dev", there, netns=netns)
        mac = subprocess.run(
            ["ip", "netns", "exec", netns, "cat", f"/sys/class/net/{there}/address"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        _ip("neigh", "replace", "10.213.7.2", "lladdr", mac, "dev", here, "nud", "permanent")
        yield "10.213.7.2"  # the far end stays down: what is sent there is gone
    finally:
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        subprocess.run(["ip", "link", "del", here], capture_output=True)


def strictly_json(text: str) -> Any:
    """json.loads that refuses NaN/Infinity, which other JSON readers (jq, JS) reject."""
    import json

    def refuse(value: str) -> Any:
        raise ValueError(f"not JSON: {value}")

    return json.loads(text, parse_constant=refuse)


def sigcont_all(pids: Sequence[int]) -> None:
    signal_all(pids, signal.SIGCONT)
