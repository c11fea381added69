"""SSH transport (asyncssh). The one place where asyncssh and socket errors become fleet outcomes.

Per run, not per connection: private keys and known_hosts files are read once, and each bastion
gets one shared connection that every target behind it tunnels through.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shlex
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleet.errors import (
    AuthError,
    HostError,
    HostKeyChangedError,
    HostKeyUnknownError,
    UnreachableError,
)
from fleet.files import ensure_private_dir
from fleet.models import Host
from fleet.transport.asyncssh_import import asyncssh
from fleet.transport.base import (
    ExecResult,
    HandshakeSlot,
    OutputSink,
    execute,
    finish_reading,
    no_slot,
    pump,
    read_tail,
)
from fleet.transport.launch import LAUNCH_GRACE_S, LaunchReport, launch_argv

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
KEEPALIVE_S = 15
KEEPALIVE_COUNT = 3
HANDSHAKE_RETRIES = 6
MAX_BACKOFF_S = 5.0
TUNNEL_HANDSHAKES = 8
END_REMOTE_S = 1.0  # how long we try to end a host's process group over a second channel
# AES-GCM before chacha20-poly1305 (asyncssh's first choice): one AEAD call per packet instead of
# several cipher contexts, 18 % less controller CPU per host over 200 real sshd (bench/README.md).
# Only AEAD and CTR modes: OpenSSH has offered AES-GCM since 6.2 and CTR since 5.2.
ENCRYPTION_ALGS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
)


@dataclass
class SSHOptions:
    accept_new: bool = False  # record unknown (never changed) keys
    fleet_known_hosts: Path | None = None  # fleet's own file, where --accept-new writes
    handshake_retries: int = HANDSHAKE_RETRIES
    tunnel_handshakes: int = TUNNEL_HANDSHAKES  # at once through one bastion connection
    keepalive_s: float = KEEPALIVE_S
    # told of every key --accept-new records: "gpu-03 ([10.0.0.3]:22) SHA256:… in FILE"
    on_key_recorded: Callable[[str], None] | None = None


class HostKeyPolicy(asyncssh.SSHClient):
    """Called by asyncssh only for a key that known_hosts does not trust: remember it, and accept
    it only under --accept-new when known_hosts has no key at all for this host."""

    def __init__(
        self,
        known: asyncssh.SSHKnownHosts,
        accept_new: bool,
        on_accept: Callable[[str, int, asyncssh.SSHKey], None],
    ) -> None:
        self.known, self.accept_new, self.on_accept = known, accept_new, on_accept
        self.offered: asyncssh.SSHKey | None = None
        self.has_other_key = False

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        self.offered = key
        trusted, _ca, revoked, *_ = self.known.match(host, addr, port)
        self.has_other_key = bool(trusted) or bool(revoked)
        if self.accept_new and not self.has_other_key:
            self.on_accept(host, port, key)
            return True
        return False


class SSHTransport:
    def __init__(self, options: SSHOptions | None = None) -> None:
        self.options = options or SSHOptions()
        self._keys: dict[str, Sequence[asyncssh.SSHKeyPair]] = {}
        self._known: dict[str | None, asyncssh.SSHKnownHosts] = {}
        self._bastions: dict[
            tuple[str, int, str | None], asyncio.Task[asyncssh.SSHClientConnection]
        ] = {}
        self._tunnel_slots: dict[int, asyncio.Semaphore] = {}

    # ----------------------------------------------------------------------------- sessions

    async def open_session(self, host: Host, handshake: HandshakeSlot) -> SSHSession:
        return SSHSession(host, await self.connect(host, handshake=handshake))

    async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        return await execute(self, host, script, sink)

    # ------------------------------------------------------------------------------ connect

    async def connect(
        self, host: Host, *, via_bastion: bool = True, handshake: HandshakeSlot | None = None
    ) -> asyncssh.SSHClientConnection:
        if host.refused:  # resolve_hosts refused it: never contacted, by any route
            raise UnreachableError(f"fleet will not contact {host.name}", context=host.refused)
        tunnel = await self._bastion_for(host) if via_bastion and host.jump_host else None
        known = self._known_hosts(host.known_hosts)
        policy = HostKeyPolicy(
            known, self.options.accept_new, lambda a, p, k: self._record_key(a, p, k, host.name)
        )
        try:
            # the bastion's own queue first, then the caller's handshake slot: a host waiting
            # for its bastion holds no slot that a host elsewhere could use
            async with self._tunnel_slot(tunnel), handshake or no_slot():
                return await self._connect_with_retries(host, known, policy, tunnel)
        except HostError:
            raise
        except Exception as exc:
            offered = None
            if isinstance(exc, asyncssh.PermissionDenied):
                offered = await keys_offered(host)
            raise classify(exc, host, policy, offered) from exc

    def _tunnel_slot(self, tunnel: asyncssh.SSHClientConnection | None) -> HandshakeSlot:
        """One bastion connection carries every target behind it: bound the handshakes in flight
        over it, so a bastion that limits channels or startups is not flooded all at once."""
        if tunnel is None:
            return no_slot()
        return self._tunnel_slots.setdefault(
            id(tunnel), asyncio.Semaphore(self.options.tunnel_handshakes)
        )

    async def _connect_with_retries(
        self,
        host: Host,
        known: asyncssh.SSHKnownHosts,
        policy: HostKeyPolicy,
        tunnel: asyncssh.SSHClientConnection | None,
    ) -> asyncssh.SSHClientConnection:
        for attempt in range(self.options.handshake_retries + 1):
            try:
                conn, _ = await asyncssh.create_connection(
                    lambda: policy,
                    host.address,
                    port=host.port,
                    tunnel=tunnel,
                    username=host.user or _local_user(),
                    known_hosts=known,
                    **self._auth_options(host),
                    connect_timeout=host.connect_timeout,
                    config=None,
                    keepalive_interval=self.options.keepalive_s,
                    keepalive_count_max=KEEPALIVE_COUNT,
                    encryption_algs=list(ENCRYPTION_ALGS),
                    **_proxy_option(host, tunnel),
                )
                return conn
            except (
                ConnectionResetError,
                asyncssh.ConnectionLost,
                BrokenPipeError,
                asyncssh.ChannelOpenError,
            ) as exc:
                # sshd's MaxStartups drops handshakes beyond its limit, and a bastion out of
                # channels refuses a tunnel with "resource shortage": back off and try again
                if attempt == self.options.handshake_retries or not _transient(exc):
                    raise
                await asyncio.sleep(min(MAX_BACKOFF_S, random.uniform(0.1, 0.4) * 2**attempt))
        raise AssertionError("unreachable")

    async def _bastion_for(self, host: Host) -> asyncssh.SSHClientConnection:
        assert host.jump_host
        bastion = host.jump_host
        key = (bastion.address, bastion.port, bastion.user)
        if key not in self._bastions or _closed(self._bastions[key]):  # first use, or it dropped
            self._bastions[key] = asyncio.ensure_future(self.connect(bastion, via_bastion=False))
        try:
            return await asyncio.shield(self._bastions[key])
        except HostError as exc:
            raise type(exc)(f"jump host {host.jump}: {exc.message}", hint=exc.hint) from exc

    # ------------------------------------------------------------------- loaded once per run

    def _auth_options(self, host: Host) -> dict[str, object]:
        """The keys to offer; with IdentitiesOnly (ssh_config), the identity file's and no agent's."""
        options: dict[str, object] = {"client_keys": self._client_keys(host.identity_file)}
        if host.identities_only and host.identity_file:
            options["agent_path"] = None
        return options

    def _client_keys(self, path: str | None) -> Sequence[asyncssh.SSHKeyPair]:
        if not path:
            return ()  # asyncssh's defaults: ~/.ssh/id_* and the agent
        if path not in self._keys:
            try:
                self._keys[path] = asyncssh.load_keypairs(path)
            except OSError as exc:
                raise AuthError(
                    f"cannot read identity_file {path}: {exc.strerror}",
                    hint="fix identity_file in the inventory, or remove it to use ssh-agent "
                    "and ~/.ssh/id_*",
                ) from exc
            except asyncssh.KeyImportError as exc:
                raise AuthError(
                    f"cannot load identity_file {path}: {exc}",
                    hint="an encrypted key must be loaded into ssh-agent instead",
                ) from exc
        return self._keys[path]

    def _known_hosts(self, path: str | None) -> asyncssh.SSHKnownHosts:
        if path not in self._known:
            files = [os.path.expanduser(path or DEFAULT_KNOWN_HOSTS)]
            if self.options.fleet_known_hosts:
                files.append(str(self.options.fleet_known_hosts))
            self._known[path] = asyncssh.import_known_hosts("".join(_read(f) for f in files))
        return self._known[path]

    def _record_key(self, host: str, port: int, key: asyncssh.SSHKey, name: str = "") -> None:
        target = self.options.fleet_known_hosts
        if target is None:
            return
        known_name = host if port == 22 else f"[{host}]:{port}"
        line = f"{known_name} {key.export_public_key().decode().strip()}\n"
        ensure_private_dir(target.parent)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as handle:
            handle.write(line)
        if self.options.on_key_recorded:
            fingerprint = key.get_fingerprint("sha256")
            self.options.on_key_recorded(f"{name or host} ({known_name}) {fingerprint} in {target}")

    async def close(self) -> None:
        for task in self._bastions.values():
            if task.done() and not task.cancelled() and task.exception() is None:
                task.result().abort()
            else:
                task.cancel()


class SSHSession:
    """One host's connection, from handshake to abort: runs one script in one channel."""

    def __init__(self, host: Host, conn: asyncssh.SSHClientConnection) -> None:
        self.host, self.conn = host, conn

    async def close(self) -> None:
        self.conn.abort()  # abort, not close: a hung remote must not hold us up

    async def run(self, script: bytes, sink: OutputSink) -> ExecResult:
        host, conn = self.host, self.conn
        try:
            process = await conn.create_process(remote_command(host.python, script), encoding=None)
        except (asyncssh.Error, OSError) as exc:  # e.g. sshd refused the session channel
            raise UnreachableError(
                f"{host.name} ({host.target()}) refused to run {host.python}",
                context=str(getattr(exc, "reason", "") or exc or type(exc).__name__),
            ) from exc
        stderr_task = asyncio.ensure_future(read_tail(process.stderr))
        launch = LaunchReport(sink)
        try:
            send_script(process, script)
            if not await pump(process.stdout, launch):
                await _end_remote(conn, process, launch.pgid)
            await process.wait_closed()
        except asyncio.CancelledError:
            # deadline or Ctrl-C: the host-side `timeout` and the script's alarm are the backstop
            await _end_remote(conn, process, launch.pgid)
            stderr_task.cancel()
            raise
        except (asyncssh.Error, OSError):
            # the connection died mid-run (sshd killed, host gone): what arrived is kept, and
            # a missing exit status tells `conclude` the connection was lost
            stderr_task.cancel()
            return ExecResult(exit_status=None)
        stderr = await finish_reading(stderr_task)
        return ExecResult(
            exit_status=process.exit_status, exit_signal=_signal_of(process), stderr_tail=stderr
        )


# ------------------------------------------------------------------------------------ helpers


def send_script(process: asyncssh.SSHClientProcess[bytes], script: bytes) -> None:
    """The script on the remote's stdin. A remote that ends before taking it all (a missing
    interpreter exits 127 at once) closes its side first: that is no lost connection, its exit
    status and stderr say what happened, so the write's error is not the run's outcome."""
    try:
        process.stdin.write(script)
        process.stdin.write_eof()
    except (asyncssh.Error, OSError):
        pass


def remote_command(python: str, script: bytes) -> str:
    """The launch wrapper's argv (fleet.transport.launch.launch_argv) as one command line for the
    remote login shell, every word quoted: nothing from the inventory is read as shell syntax."""
    return shlex.join(launch_argv(python, script))


def end_group_command(pgid: int) -> str:
    """Ends a process group on the host: TERM (the host runner then kills its probes' own groups),
    KILL after the grace. In the background, detached from the channel we close at once."""
    kill = f"kill -TERM -{pgid}; sleep {LAUNCH_GRACE_S}; kill -KILL -{pgid}"
    return shlex.join(["sh", "-c", f"({kill}) </dev/null >/dev/null 2>&1 &"])


def _proxy_option(host: Host, tunnel: asyncssh.SSHClientConnection | None) -> dict[str, list[str]]:
    """ProxyCommand as asyncssh runs it: an argv (no shell), the connection on its stdin/stdout."""
    if host.proxy_command and tunnel is None:
        return {"proxy_command": list(host.proxy_command)}
    return {}


def _transient(exc: Exception) -> bool:
    if isinstance(exc, asyncssh.ChannelOpenError):
        return exc.code == asyncssh.OPEN_RESOURCE_SHORTAGE
    return True


def _closed(task: asyncio.Task[asyncssh.SSHClientConnection]) -> bool:
    """A bastion connection that was made and has since been closed (the bastion went away)."""
    if not task.done() or task.cancelled() or task.exception() is not None:
        return False
    return bool(task.result().is_closed())


def _stop_remote(process: asyncssh.SSHClientProcess[bytes]) -> None:
    with contextlib.suppress(
        Exception
    ):  # sshd may refuse signals (root sessions before OpenSSH 10)
        process.send_signal("KILL")
    process.close()


async def _end_remote(
    conn: asyncssh.SSHClientConnection, process: asyncssh.SSHClientProcess[bytes], pgid: int | None
) -> None:
    """Stop the session, and end the process group the launch wrapper reported over a second
    channel: that works where sshd refuses our signals. Bounded: a frozen host costs 1 s."""
    _stop_remote(process)
    if pgid is None:
        return
    with contextlib.suppress(Exception):
        await asyncio.wait_for(conn.run(end_group_command(pgid), check=False), END_REMOTE_S)


def _signal_of(process: asyncssh.SSHClientProcess[bytes]) -> str | None:
    exit_signal = process.exit_signal
    return f"SIG{exit_signal[0]}" if exit_signal else None


def _local_user() -> str:
    import getpass

    return getpass.getuser()


def _read(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text if text.endswith("\n") or not text else text + "\n"


def classify(
    exc: BaseException, host: Host, policy: HostKeyPolicy, offered: list[str] | None = None
) -> HostError:
    """Map an asyncssh or socket exception to the HostError (and so the status) a user sees;
    `offered`: the keys offered, as keys_offered says them (for a refused login)."""
    where = f"{host.name} ({host.target()})"
    try_ssh = ssh_command(host)
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return _host_key_error(host, where, policy)
    if isinstance(exc, asyncssh.PermissionDenied):
        return _auth_error(host, where, try_ssh, offered)
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return UnreachableError(
            f"cannot connect to {where}",
            context=f"no answer within {host.connect_timeout:g} s",
            hint=f"is the host up and the port open? try: {try_ssh}",
        )
    if isinstance(exc, socket.gaierror):
        return UnreachableError(
            f"cannot resolve {host.address} ({host.name})",
            context=str(exc.strerror),
            hint="check the address in the inventory and DNS",
        )
    if host.proxy_command and isinstance(exc, OSError) and exc.filename:
        return UnreachableError(
            f"cannot connect to {where}: cannot run its ProxyCommand",
            context=f"{shlex.join(host.proxy_command)}: {exc.strerror}",
            hint=f"is {host.proxy_command[0]} installed here? It comes from "
            f"{host.origin('proxy_command')}",
        )
    if isinstance(exc, ConnectionRefusedError):
        return UnreachableError(
            f"cannot connect to {where}",
            context="connection refused",
            hint=f"is sshd listening there? try: {try_ssh}",
        )
    reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
    return UnreachableError(
        f"cannot connect to {where}", context=str(reason), hint=f"try: {try_ssh}"
    )


def _auth_error(host: Host, where: str, try_ssh: str, offered: list[str] | None) -> AuthError:
    user = host.user or _local_user()
    if offered is not None and not any(k.startswith(KEY_MARK) for k in offered):
        return AuthError(
            f"{where} refused the login: fleet had no key to offer",
            context=f"user {user}; " + "; ".join(offered),
            hint="name a key: --identity FILE (with -H) or identity_file in the inventory, or "
            f"load one into ssh-agent (ssh-add); try: {try_ssh}",
        )
    keys = ", ".join(k.removeprefix(KEY_MARK) for k in offered or () if k.startswith(KEY_MARK))
    return AuthError(
        f"{where} refused our key(s): permission denied",
        context=f"user {user}, offered {keys or host.identity_file or 'ssh defaults'}",
        hint=f"check the key against the host's authorized_keys; try: {try_ssh}",
    )


KEY_MARK = "+"  # keys_offered's items that are keys; the others say why none came from a source


async def keys_offered(host: Host) -> list[str]:
    """What fleet offered `host` to log in with, each key marked KEY_MARK, and where none came
    from a source, why: the identity file, or asyncssh's defaults (~/.ssh/id_*), and the
    agent's keys unless IdentitiesOnly. Only for the message of a refused login."""
    if host.identity_file:
        found = [f"{KEY_MARK}{host.identity_file}"]
    else:
        found = [f"{KEY_MARK}{p}" for p in _default_keys()] or ["no default key file in ~/.ssh"]
    if not (host.identities_only and host.identity_file):
        found.append(await _agent_keys())
    return found


def _default_keys() -> list[str]:
    return [p for p in DEFAULT_KEY_FILES if os.path.isfile(os.path.expanduser(p))]


DEFAULT_KEY_FILES = tuple(
    f"~/.ssh/{name}"
    for name in ("id_ed25519_sk", "id_ecdsa_sk", "id_ed448", "id_ed25519", "id_ecdsa", "id_rsa")
)
AGENT_ASK_S = 2.0


async def _agent_keys() -> str:
    """The agent's keys as KEY_MARK + "N agent key(s)", or why there were none."""
    if not os.environ.get("SSH_AUTH_SOCK"):
        return "no ssh-agent (SSH_AUTH_SOCK is not set)"
    try:
        agent = await asyncio.wait_for(asyncssh.connect_agent(), AGENT_ASK_S)
        try:
            count = len(await asyncio.wait_for(agent.get_keys(), AGENT_ASK_S))
        finally:
            agent.close()
    except (OSError, asyncssh.Error, asyncio.TimeoutError, ValueError):
        return "ssh-agent did not answer"
    return f"{KEY_MARK}{count} agent key(s)" if count else "ssh-agent holds no key"


def ssh_command(host: Host) -> str:
    """The ssh command that takes fleet's own path to `host`: user, port, identity, known_hosts,
    jump host, so that a hint tests what fleet tried and not another route."""
    words = ["ssh", "-p", str(host.port)]
    if host.identity_file:
        words += ["-i", host.identity_file]
        if host.identities_only:
            words += ["-o", "IdentitiesOnly=yes"]
    if host.known_hosts:
        words += ["-o", f"UserKnownHostsFile={host.known_hosts}"]
    if host.jump_host:
        words += ["-J", _jump_spec(host.jump_host)]
    elif host.proxy_command:
        command = shlex.join(host.proxy_command).replace("%", "%%")  # ssh expands %-tokens
        words += ["-o", f"ProxyCommand={command}"]
    words += [f"{host.user + '@' if host.user else ''}{host.address}", "true"]
    return " ".join(shlex.quote(word) for word in words)


def _jump_spec(bastion: Host) -> str:
    user = f"{bastion.user}@" if bastion.user else ""
    address = f"[{bastion.address}]" if ":" in bastion.address else bastion.address
    return f"{user}{address}:{bastion.port}"


def _host_key_error(host: Host, where: str, policy: HostKeyPolicy) -> HostError:
    fingerprint = policy.offered.get_fingerprint("sha256") if policy.offered else "unknown"
    known = host.known_hosts or DEFAULT_KNOWN_HOSTS
    if policy.has_other_key:
        return HostKeyChangedError(
            f"host key of {where} has CHANGED: it now offers {fingerprint}",
            context=f"{known} holds a different key for it: this may be an attack",
            hint="if the host was reinstalled, remove its old line: "
            f"ssh-keygen -R {_known_name(host)} -f {known}",
        )
    return HostKeyUnknownError(
        f"host key of {where} is not known: {fingerprint}",
        context=f"no entry for it in {known}",
        hint="check the fingerprint on the host (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub),"
        " then run with --accept-new, or add it with ssh-keyscan",
    )


def _known_name(host: Host) -> str:
    return host.address if host.port == 22 else f"'[{host.address}]:{host.port}'"
