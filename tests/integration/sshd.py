"""Real OpenSSH sshd servers on 127.0.0.x for the integration tests, with fresh keys every session.

Each test "host" is its own sshd process with its own address, port and host key. sshd's `SetEnv`
gives a host its own PATH/PYTHONPATH (a fake nvidia-smi, a stub torch) or a secret canary, the way
a real fleet differs host by host. Host-key verification stays on: known_hosts lists each key.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


def find_sshd() -> str | None:
    for candidate in SSHD_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("sshd")


def keygen(path: Path) -> str:
    """Make an ed25519 key pair at `path`; return the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        check=True,
    )
    return (
        path.with_suffix(".pub").read_text().strip()
        if path.suffix
        else Path(f"{path}.pub").read_text().strip()
    )


PORT_ATTEMPTS = 5


def free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


@dataclass
class SshdHost:
    name: str
    address: str
    port: int
    host_key_pub: str
    home: Path
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    def known_hosts_line(self) -> str:
        return f"[{self.address}]:{self.port} {self.host_key_pub}"


@dataclass
class SshdFarm:
    """Starts and stops sshd "hosts"; all trust one client key."""

    root: Path
    sshd: str
    hosts: dict[str, SshdHost] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.client_key = self.root / "client_key"
        self.client_pub = keygen(self.client_key)
        self.wrong_key = self.root / "wrong_key"
        keygen(self.wrong_key)
        self.authorized_keys = self.root / "authorized_keys"
        self.authorized_keys.write_text(self.client_pub + "\n")
        os.chmod(self.authorized_keys, 0o600)
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation dir, needed when root

    def start(
        self,
        name: str,
        address: str,
        set_env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        **options: str,
    ) -> SshdHost:
        """Start one sshd; `options` override sshd_config keywords, e.g. MaxStartups="1:100:1";
        `prefix` runs it through a wrapper, e.g. ("ip", "netns", "exec", NS) (which execs sshd)."""
        hostdir = self.root / name
        hostdir.mkdir()
        host_key = hostdir / "host_key"
        pub = keygen(host_key)
        home = hostdir / "home"
        home.mkdir()
        env = {"HOME": str(home), "TMPDIR": str(home), **(set_env or {})}
        for attempt in range(PORT_ATTEMPTS):
            # The port is free when picked but may be taken before sshd binds it: pick again.
            port = free_port(address) if not prefix else 2200 + attempt  # its own namespace
            config = hostdir / "sshd_config"
            config.write_text(
                sshd_config(
                    address,
                    port,
                    host_key,
                    self.authorized_keys,
                    env,
                    hostdir / "sshd.pid",
                    options,
                )
            )
            log = hostdir / "sshd.log"
            with log.open("wb") as log_file:  # sshd keeps its own copy of the descriptor
                process = subprocess.Popen(
                    [*prefix, self.sshd, "-D", "-e", "-f", str(config)],
                    stdout=subprocess.DEVNULL,
                    stderr=log_file,
                )
            host = SshdHost(name, address, port, pub, home, process, log)
            try:
                wait_listening(host)
                break
            except RuntimeError:
                lost_race = "Address already in use" in log.read_text()
                if not lost_race or attempt == PORT_ATTEMPTS - 1:
                    raise
        self.hosts[name] = host
        return host

    def known_hosts(self, path: Path, names: list[str] | None = None) -> Path:
        chosen = [self.hosts[n] for n in (list(self.hosts) if names is None else names)]
        path.write_text("".join(h.known_hosts_line() + "\n" for h in chosen))
        return path

    def stop(self) -> None:
        for host in self.hosts.values():
            if host.process and host.process.poll() is None:
                host.process.terminate()
                host.process.wait(5)


def sshd_config(
    address: str,
    port: int,
    host_key: Path,
    authorized_keys: Path,
    env: Mapping[str, str],
    pid_file: Path,
    options: Mapping[str, str],
) -> str:
    settings = {"MaxStartups": "100:30:200", "LogLevel": "VERBOSE", **options}
    set_env = " ".join(f'"{k}={v}"' for k, v in env.items())
    extra = "".join(f"{key} {value}\n" for key, value in settings.items())
    return f"""\
ListenAddress {address}:{port}
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {authorized_keys}
UsePAM no
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
SetEnv {set_env}
{extra}"""


def wait_listening(host: SshdHost, timeout_s: float = 10.0) -> None:
    """Wait for sshd's "Server listening" line: no probe connection, so logs stay exact."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if host.process and host.process.poll() is not None:
            raise RuntimeError(f"sshd for {host.name} exited: {host.log and host.log.read_text()}")
        if host.log and "Server listening" in host.log.read_text():
            return
        time.sleep(0.02)
    raise RuntimeError(f"sshd for {host.name} did not listen on {host.address}:{host.port}")
