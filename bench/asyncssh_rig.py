"""An SSH fleet for a machine with no sshd: asyncssh's own server, N hosts on 127.77.x.y.

    python3 bench/asyncssh_rig.py --hosts 50 --procs 2 --dir /tmp/rig   # serves until Ctrl-C
    fleet probe -i /tmp/rig/inventory.yaml -p system --workers 2

Each host is a listener of its own (its address, a port the kernel picks, its own ed25519 host
key) spread over `--procs` server processes, neighbours in the inventory on different ones
(server_slot: fleet handshakes hosts in inventory order, and a block of neighbours on one
process would make that process's one core the wall); known_hosts lists every key, so fleet verifies host
keys as it does anywhere, and the hosts accept one client key (`client_key`, in the inventory).

What a host answers, so that the figure measured is the controller's: the first session of a
given command and script (fleet's launch line and bundle) runs it for real on this machine, once
for the whole rig (`sh -c COMMAND`, the script on stdin, as sshd would), and its output is
recorded in DIR/replay/; every session after it, on any host, replays that recording: the same
bytes the real probe wrote, streamed back at once, with the launch line (the host's process
group) left out so that fleet never ends a group on this machine. A small probe (`-p system`)
keeps that first real run short. Any other command (fleet ending a host's process group at its
deadline) exits 0 and does nothing. Needs only what `pip install .` brings (asyncssh).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import getpass
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import yaml

HOSTS_PER_OCTET = 250
LAUNCH_MARK = "fleet-launch"  # fleet's launch wrapper's $0: a session that runs the bundle
READY = "ready"


def host_name(index: int) -> str:
    return f"rig-{index:05d}"


def host_address(index: int) -> str:
    return f"127.77.{index // HOSTS_PER_OCTET}.{index % HOSTS_PER_OCTET + 1}"


def server_slot(index: int, procs: int) -> int:
    """Which server process serves host `index`: every run of `procs` neighbours in the
    inventory on `procs` different processes, shifted by one each run. Neighbours are handshaken
    together (the fan-out starts hosts in inventory order): served by one process in a block,
    they would queue on its one core while the others idle (the rig, not fleet, bounding the
    wall). The shift keeps a worker dealt every Nth host (workers.deal) from meeting one server
    process only when N is `procs`."""
    return (index + index // procs) % procs


def served_by(slot: int, hosts: int, procs: int) -> list[int]:
    return [index for index in range(hosts) if server_slot(index, procs) == slot]


# ------------------------------------------------------------------------- the rig's front


@dataclass
class Rig:
    """A started rig: its inventory (fleet YAML), known_hosts, and its server processes."""

    root: Path
    inventory: Path
    known_hosts: Path
    servers: list[subprocess.Popen[str]] = field(default_factory=list)

    def stop(self) -> None:
        for server in self.servers:
            if server.poll() is None:
                server.terminate()
        for server in self.servers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(10)
            if server.poll() is None:
                server.kill()
                server.wait()

    def __enter__(self) -> Rig:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_rig(root: Path, hosts: int, procs: int, python: str = sys.executable) -> Rig:
    """Start `hosts` rig hosts in `procs` server processes; return once every one listens."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "replay").mkdir(exist_ok=True)
    client_key = root / "client_key"
    if not client_key.exists():
        asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(client_key))
        client_key.chmod(0o600)
    rig = Rig(root, root / "inventory.yaml", root / "known_hosts")
    try:
        listening = _start_servers(rig, hosts, procs)
    except BaseException:
        rig.stop()
        raise
    rig.known_hosts.write_text("".join(f"[{h['address']}]:{h['port']} {h['key']}\n"
                                       for h in listening))  # fmt: skip
    write_inventory(rig, listening, client_key, python)
    return rig


def _start_servers(rig: Rig, hosts: int, procs: int) -> list[dict[str, str | int]]:
    procs = max(1, min(procs, hosts))
    for slot in range(procs):
        command = [sys.executable, __file__, "serve", "--dir", str(rig.root),
                   "--slot", str(slot), "--of", str(procs), "--hosts", str(hosts)]  # fmt: skip
        rig.servers.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    listening: list[dict[str, str | int]] = []
    for server in rig.servers:
        assert server.stdout is not None
        for line in server.stdout:
            if line.strip() == READY:
                break
            listening.append(json.loads(line))
        else:
            raise RuntimeError(f"a rig server ended before it listened (exit {server.wait()})")
    return sorted(listening, key=lambda host: str(host["name"]))


def write_inventory(
    rig: Rig, listening: Sequence[dict[str, str | int]], client_key: Path, python: str
) -> None:
    """A fleet YAML inventory of the rig's hosts, keys checked as anywhere. Block style, as
    people write them: JSON (flow style) is read by fleet's format sniffing with PyYAML's pure
    Python loader, about 0.2 s more of the parent's serial start at 2,000 hosts."""
    document = {
        "defaults": {
            "user": getpass.getuser(),
            "identity_file": str(client_key),
            "known_hosts": str(rig.known_hosts),
            "python": python,
            "connect_timeout": 30,
        },
        "hosts": {h["name"]: {"address": h["address"], "port": h["port"]} for h in listening},
    }
    rig.inventory.write_text(yaml.safe_dump(document, sort_keys=False))


# ---------------------------------------------------------------------- a server process


class Replays:
    """The recorded answer to each (command, script): recorded once for the whole rig (the
    first server to finish its real run links its file into place; the others read that)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.answers: dict[str, asyncio.Future[tuple[bytes, int]]] = {}

    async def answer(self, command: str, script: bytes) -> tuple[bytes, int]:
        key = hashlib.sha256(command.encode() + b"\0" + script).hexdigest()
        if key not in self.answers:
            self.answers[key] = asyncio.ensure_future(self._recorded(key, command, script))
        return await self.answers[key]

    async def _recorded(self, key: str, command: str, script: bytes) -> tuple[bytes, int]:
        path = self.folder / key
        if not path.exists():
            output, status = await run_for_real(command, script)
            draft = path.with_name(f".{key}.{os.getpid()}")
            record = {"stdout": base64.b64encode(output).decode(), "exit": status}
            draft.write_text(json.dumps(record))
            with contextlib.suppress(FileExistsError):
                os.link(draft, path)  # the first recording wins: every host answers alike
            draft.unlink()
        record = json.loads(path.read_text())
        return base64.b64decode(record["stdout"]), int(record["exit"])


async def run_for_real(command: str, script: bytes) -> tuple[bytes, int]:
    """The bundle run once on this machine, as sshd runs a command; its launch line dropped."""
    process = await asyncio.create_subprocess_exec(
        "sh", "-c", command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    output, _ = await process.communicate(script)
    kept = [line for line in output.splitlines(keepends=True) if b'"type":"launch"' not in line]
    return b"".join(kept), process.returncode or 0


def make_handler(replays: Replays):  # type: ignore[no-untyped-def]
    async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command or ""
        if LAUNCH_MARK not in command:  # ending a process group: there is none here
            process.exit(0)
            return
        script = await process.stdin.read()
        output, status = await replays.answer(command, script)
        process.stdout.write(output)
        process.exit(status)

    return handle


async def serve(root: Path, indices: Sequence[int]) -> None:
    """Listen for the hosts `indices`, say each (name, address, port, key), then READY."""
    client = asyncssh.read_private_key(str(root / "client_key"))
    authorized = asyncssh.import_authorized_keys(client.export_public_key().decode())
    handler = make_handler(Replays(root / "replay"))
    servers = []
    for index in indices:
        key = asyncssh.generate_private_key("ssh-ed25519")
        server = await asyncssh.create_server(
            asyncssh.SSHServer, host_address(index), 0, server_host_keys=[key],
            authorized_client_keys=authorized, process_factory=handler, encoding=None,
            allow_scp=False, agent_forwarding=False, x11_forwarding=False,
        )  # fmt: skip
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        line = {"name": host_name(index), "address": host_address(index), "port": port,
                "key": key.export_public_key().decode().strip()}  # fmt: skip
        print(json.dumps(line), flush=True)
    print(READY, flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def raise_open_files() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ------------------------------------------------------------------------------ command line


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", default="rig", choices=["rig", "serve"])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/fleet-rig"))
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--procs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--slot", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--of", type=int, default=1, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    raise_open_files()
    if args.mode == "serve":
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the rig's front stops its servers
        asyncio.run(serve(args.dir, served_by(args.slot, args.hosts, args.of)))
        return 0
    started = time.monotonic()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # TERM stops the rig as Ctrl-C does
    with start_rig(args.dir, args.hosts, args.procs) as rig:
        print(
            f"{args.hosts} rig hosts in {args.procs} processes ({time.monotonic() - started:.1f} s)"
        )
        print(f"inventory: {rig.inventory}\nknown_hosts: {rig.known_hosts}\nCtrl-C stops the rig")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
