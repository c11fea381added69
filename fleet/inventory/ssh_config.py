"""~/.ssh/config for every SSH host, read by asyncssh's own parser (asyncssh.config.SSHClientConfig).

Host patterns are matched against the host's name in fleet (its inventory name, or the name given
to -H), as `ssh NAME` would. A value written in the inventory (or on the command line, or in an
Ansible inventory) wins over the config; the config wins over fleet's defaults, as with ssh, where
the first value obtained wins. Each value taken from the config keeps its file:line (`fleet hosts`).

Host keys stay strict whatever the config says: keywords that asyncssh ignores but that change what
a user expects (StrictHostKeyChecking, ControlMaster, ControlPersist, ProxyCommand) get a one-line
warning naming their line. fleet tunnels through one jump host (ProxyJump), so a chain is an error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.errors import InventoryError
from fleet.models import Host

if TYPE_CHECKING:  # asyncssh loads only when a config is read: it costs ~100 ms of start-up
    from fleet.inventory.ssh_config_parser import TracedConfig

DEFAULT_SSH_CONFIG = "~/.ssh/config"
# ssh_config keyword → the Host field it fills (only where the inventory left it at a default)
FIELDS = {
    "Hostname": "address",
    "Port": "port",
    "User": "user",
    "IdentityFile": "identity_file",
    "IdentitiesOnly": "identities_only",
    "UserKnownHostsFile": "known_hosts",
    "ProxyJump": "jump",
    "ConnectTimeout": "connect_timeout",
}


@dataclass
class SshConfig:
    """One or more ssh_config files; `lookup(name)` gives what they say for `ssh name`."""

    paths: tuple[Path, ...]
    warnings: list[str] = field(default_factory=list)  # one line per ignored keyword's place
    _cache: dict[str, TracedConfig] = field(default_factory=dict, repr=False)

    def lookup(self, name: str) -> TracedConfig:
        if name not in self._cache:
            self._cache[name] = self._parse(name)
            self._note_ignored(self._cache[name])
        return self._cache[name]

    def _parse(self, name: str) -> TracedConfig:
        from fleet.inventory.ssh_config_parser import parse_for

        return parse_for(self.paths, name)

    def _note_ignored(self, parsed: TracedConfig) -> None:
        for place, option, value, why in parsed.ignored:
            line = f"{place}: {option} {value} is ignored: {why}"
            if line not in self.warnings:
                self.warnings.append(line)


def open_ssh_config(choice: str | None) -> SshConfig | None:
    """--ssh-config: a PATH, `none`, or unset (the user's ~/.ssh/config when it exists)."""
    if choice is not None and choice.lower() == "none":
        return None
    path = Path(os.path.expanduser(choice or DEFAULT_SSH_CONFIG))
    if not path.is_file():
        if choice is None:
            return None
        raise InventoryError(
            f"ssh config {choice} does not exist",
            hint="pass an existing file with --ssh-config, or --ssh-config none",
        )
    return SshConfig((path,))


# ------------------------------------------------------------------------------------- applying


def apply_ssh_config(host: Host, config: SshConfig | None, name: str | None = None) -> Host:
    """`host` with the config's values for `name` (default: its own name) where it has defaults."""
    if config is None or host.transport != "ssh":
        return host
    parsed = config.lookup(name or host.name)
    changes: dict[str, Any] = {}
    origins = dict(host.origins)
    for option, setting in FIELDS.items():
        if setting in host.origins or option not in parsed.places:
            continue
        value = _field_value(option, parsed.get(option), parsed.places[option], host)
        if value is not _SKIP:
            changes[setting] = value
            origins[setting] = f"ssh_config {parsed.places[option]}"
    return replace(host, **changes, origins=origins) if changes else host


_SKIP = object()


def _field_value(option: str, value: Any, place: str, host: Host) -> Any:
    if option == "IdentityFile":
        return _first_existing(value) or _SKIP  # ssh skips identity files that are not there
    if option == "UserKnownHostsFile":
        return os.path.expanduser(value[0]) if value else _SKIP
    if option == "ProxyJump":
        return _jump(value, place, host)
    if option == "ConnectTimeout":
        return float(value)
    if option == "IdentitiesOnly":
        return bool(value)
    return value


def _first_existing(paths: Sequence[str] | None) -> str | None:
    for path in paths or ():
        expanded = os.path.expanduser(path)
        if os.path.isfile(expanded):
            return expanded
    return None


def _jump(value: str | None, place: str, host: Host) -> Any:
    if not value:
        return None  # ProxyJump none
    if "," in value:
        raise InventoryError(
            f"ssh config {place}: ProxyJump {value} (for {host.name}) chains several jump hosts",
            hint="fleet tunnels through one jump host: give it direct access to the targets, "
            "or set jump: in a fleet inventory",
        )
    return value[len("ssh://") :] if value.startswith("ssh://") else value
