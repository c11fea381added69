"""~/.ssh/config for every SSH host, read as OpenSSH reads it (_reader.py)
and applied here to fleet's hosts.

Host patterns are matched against the name ssh would be given: the host's name in fleet (its
inventory name, or the name given to -H), or for an Ansible host the address Ansible passes to ssh
(ansible_host, else its name). A value written in the inventory (or on the command line, or in an
Ansible inventory) wins over the config; the config wins over fleet's defaults, as with ssh, where
the first value obtained wins. Each value taken from the config keeps its file:line (`fleet hosts`).

Honoured: Hostname (%h), Port, User, IdentityFile (every one, %-tokens and ~ expanded; fleet
offers the first that exists), IdentitiesOnly, UserKnownHostsFile (the first), ConnectTimeout,
ProxyJump (one hop: a chain is refused) and ProxyCommand (_proxy_command.py).
Host keys stay strict whatever the config says: StrictHostKeyChecking, ControlMaster,
ControlPersist and HostKeyAlias get a one-line warning naming their line. What would change where
or how ssh connects and fleet cannot do (CanonicalizeHostname with domains to try, BindAddress,
BindInterface, ProxyUseFdpass, a `Match exec` block) refuses that host, naming the line: it is
never contacted another way.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import socket
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fleet.inventory.openssh._options import ProxyState, SshConfigValues, is_address, percent_expand
from fleet.inventory.openssh._proxy_command import ProxyCommandError, command_words, expand_words
from fleet.models import Host

# ssh_config keyword → the Host field it fills (only where the inventory left it at a default)
FIELDS = {
    "Hostname": "address",
    "Port": "port",
    "User": "user",
    "IdentitiesOnly": "identities_only",
    "UserKnownHostsFile": "known_hosts",
    "ConnectTimeout": "connect_timeout",
}
IGNORED = {
    "StrictHostKeyChecking": "fleet checks host keys strictly whatever this says "
    "(--accept-new records unknown keys, never changed ones)",
    "ControlMaster": "fleet opens its own connections (one per host, one per jump host)",
    "ControlPersist": "fleet opens its own connections (one per host, one per jump host)",
    "HostKeyAlias": "fleet looks the host's key up under its address and port",
}


# ------------------------------------------------------------------------------------- applying


def ssh_name(host: Host) -> str:
    """The name ssh is given for `host`: Ansible passes ansible_host (else the name); fleet the name."""
    return host.address if host.origin("address").startswith("ansible ") else host.name


def apply_ssh_config(
    host: Host,
    lookup: Callable[[str, tuple[tuple[str, object], ...]], SshConfigValues],
    name: str | None = None,
) -> Host:
    """`host` with the config's values for `name` (default: ssh_name(host)) where it has
    defaults. ProxyCommand's words keep their %-tokens: `expand_proxy` fills them in once every
    source has spoken."""
    if host.transport != "ssh":
        return host
    given = name or ssh_name(host)
    parsed = lookup(given, _given(host))
    changes: dict[str, Any] = {}
    origins = dict(host.origins)
    refusals = list(parsed.refusals)
    for option, setting in FIELDS.items():
        if setting in host.origins or option not in parsed.values:
            continue
        value = _field_value(option, parsed.values[option])
        if value is not None:
            changes[setting] = value
            origins[setting] = f"ssh_config {parsed.places[option]}"
    proxied = _apply_proxy(host, parsed, changes, origins, refusals)
    final = replace(host, **changes)
    refusals += connection_refusals(parsed, proxied, final.address)
    if "identity_file" not in host.origins and parsed.identity_files:
        _apply_identities(final, given, parsed, changes, origins, refusals)
    if "known_hosts" in changes:
        known = _expand_path(changes["known_hosts"], final, given, parsed)
        if known is None:
            place = parsed.places["UserKnownHostsFile"]
            refusals.append(
                f"{place}: UserKnownHostsFile {changes['known_hosts']}: ssh cannot expand it"
            )
        changes["known_hosts"] = known
    if refusals:
        changes["refused"] = "\n".join(dict.fromkeys([*filter(None, [host.refused]), *refusals]))
    return replace(host, **changes, origins=origins) if changes else host


def _given(host: Host) -> tuple[tuple[str, object], ...]:
    """User and Port the inventory set: to ssh they are -l and -p, seen by Match and %r %p."""
    return tuple(
        (option, getattr(host, setting))
        for option, setting in (("User", "user"), ("Port", "port"))
        if setting in host.origins and getattr(host, setting) is not None
    )


def _field_value(option: str, value: object) -> Any:
    if option == "UserKnownHostsFile":
        files = value if isinstance(value, list) else []
        return files[0] if files else "/dev/null"  # `none`: no file of the user's is trusted
    if option == "ConnectTimeout":
        return float(value) if isinstance(value, int) and value > 0 else None
    return value


def _apply_proxy(
    host: Host,
    parsed: SshConfigValues,
    changes: dict[str, Any],
    origins: dict[str, str],
    refusals: list[str],
) -> bool:
    """ProxyJump / ProxyCommand from the config, after what the inventory set (as ssh's command
    line comes before its config). True when the host is reached through a proxy of either kind."""
    preset = ProxyState()
    if "jump" in host.origins:
        preset.jump = host.jump or "none"
        preset.command = "none" if host.jump else None
    if "proxy_command" in host.origins:
        preset.command = "explicit" if host.proxy_command else "none"
    state = parsed.proxy(preset)
    jump, command = state.effective_jump, state.effective_command
    if jump and preset.jump is None:
        if "," in jump:
            refusals.append(
                f"{state.jump_place}: ProxyJump {jump} chains several jump hosts; fleet tunnels "
                "through one (give it direct access to the targets, or set jump: in a fleet "
                "inventory)"
            )
        changes["jump"] = jump
        origins["jump"] = f"ssh_config {state.jump_place}"
    elif command and preset.command is None:
        try:
            changes["proxy_command"] = command_words(command)
        except ProxyCommandError as exc:
            refusals.append(f"{state.command_place}: ProxyCommand {command}: {exc}")
        origins["proxy_command"] = f"ssh_config {state.command_place}"
    return bool(jump or command or host.jump or host.proxy_command)


def connection_refusals(parsed: SshConfigValues, proxied: bool, address: str) -> list[str]:
    """Settings that change where or how ssh connects, and that fleet cannot honour."""
    found = []
    canonicalize = parsed.get("CanonicalizeHostname", False)
    domains = parsed.get("CanonicalDomains") or parsed.get("CanonicalizePermittedCNAMEs")
    dots = parsed.get("CanonicalizeMaxDots", 1)
    if (
        canonicalize
        and domains
        and (canonicalize == "always" or not proxied)
        and not is_address(address)
        and (address.endswith(".") or address.count(".") <= (dots if isinstance(dots, int) else 1))
    ):
        found.append(
            f"{parsed.places['CanonicalizeHostname']}: CanonicalizeHostname "
            f"{'always' if canonicalize == 'always' else 'yes'}: ssh would try the name under "
            "each of CanonicalDomains, and fleet does not canonicalize host names"
        )
    for option in ("BindAddress", "BindInterface"):
        if parsed.get(option):
            found.append(
                f"{parsed.places[option]}: {option} {parsed.get(option)}: fleet does not choose "
                "the address it connects from"
            )
    if parsed.get("ProxyUseFdpass") and proxied:
        found.append(
            f"{parsed.places['ProxyUseFdpass']}: ProxyUseFdpass yes: fleet cannot take a "
            "connected socket from a proxy command"
        )
    return found


def _apply_identities(
    host: Host,
    given: str,
    parsed: SshConfigValues,
    changes: dict[str, Any],
    origins: dict[str, str],
    refusals: list[str],
) -> None:
    expanded = []
    for path, place in parsed.identity_files:
        full = _expand_path(path, host, given, parsed)
        if full is None:  # kept as `ssh -G` prints it; the host is refused, as ssh stops there
            refusals.append(f"{place}: IdentityFile {path}: ssh cannot expand it")
        expanded.append(path if full is None else full)
    if not expanded:
        return
    changes["identity_files"] = tuple(expanded)
    origins["identity_files"] = f"ssh_config {parsed.identity_files[0][1]}"
    existing = next((p for p in expanded if os.path.isfile(p)), None)  # ssh skips missing ones
    if existing is not None:
        changes["identity_file"] = existing
        place = parsed.identity_files[expanded.index(existing)][1]
        origins["identity_file"] = f"ssh_config {place}"


def _expand_path(path: str, host: Host, given: str, parsed: SshConfigValues) -> str | None:
    """~ then OpenSSH's client %-tokens and ${VAR} (IdentityFile, UserKnownHostsFile)."""
    local = socket.gethostname()
    remote_user = host.user or getpass.getuser()
    hostname = host.address if is_address(host.address) else host.address.lower()
    port = str(host.port)
    tokens = {
        "C": hashlib.sha1(f"{local}{hostname}{port}{remote_user}".encode()).hexdigest(),
        "L": local.split(".", 1)[0],
        "i": str(os.getuid()),
        "k": str(parsed.get("HostKeyAlias") or given),
        "l": local,
        "n": given,
        "p": port,
        "d": os.path.expanduser("~"),
        "h": hostname,
        "r": remote_user,
        "u": getpass.getuser(),
    }
    expanded = tilde_expand(path)
    return None if expanded is None else percent_expand(expanded, tokens, environment=True)


def tilde_expand(path: str) -> str | None:
    """OpenSSH's tilde_expand: `~` or `~USER` up to the first `/`; None where ssh stops (no such
    user, e.g. a Windows-style `~\\.ssh\\key`). Any other path is kept as written, relative
    ones too (ssh opens `C:\\Users\\x\\key.pem` in its working folder, backslashes kept)."""
    if not path.startswith("~"):
        return path
    expanded = os.path.expanduser(path)
    return None if expanded == path else expanded


def expand_proxy(host: Host) -> Host:
    """`host` with its ProxyCommand's %-tokens filled in from its final settings (resolve_hosts'
    last step, once per host); a value fleet will not substitute refuses the host."""
    if not host.proxy_command or host.transport != "ssh":
        return host
    hostname = host.address if is_address(host.address) else host.address.lower()
    name = ssh_name(host)
    tokens = {
        "h": hostname,
        "p": str(host.port),
        "r": host.user or getpass.getuser(),
        "n": name,
        "k": name,
    }
    try:
        return replace(host, proxy_command=expand_words(host.proxy_command, tokens))
    except ProxyCommandError as exc:
        where = host.origin("proxy_command").split(" ", 1)[-1]
        reason = f"{where}: ProxyCommand {' '.join(host.proxy_command)}: {exc}"
        refused = f"{host.refused}\n{reason}" if host.refused else reason
        return replace(host, refused=refused)
