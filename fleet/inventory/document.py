"""`fleet hosts --json FILE`: one JSON document of what fleet resolved for each selected host, and where
each setting came from, so that scripts and tests can check it (schema `fleet.hosts/1`).

    {"schema": "fleet.hosts/1", "source": "inv.yaml", "warnings": ["…"],
     "hosts": {"gpu-01": {"transport": "ssh", "hostname": "10.0.0.5", "port": 22, "user": "ops",
                          "jump": null, "jump_host": null, "proxy_command": ["nc", "10.0.0.5", "22"],
                          "identity_files": ["/home/ops/.ssh/id_ed25519"],
                          "identity_file": "/home/ops/.ssh/id_ed25519", "identities_only": false,
                          "known_hosts": null, "python": "python3", "connect_timeout": 10.0,
                          "groups": ["gpu"], "probe_args": {}, "refused": null,
                          "origins": {"hostname": "ssh_config /home/ops/.ssh/config:3", …}}}}

`hosts` keeps the selection's order. `hostname` is the address fleet connects to (ssh -G's
`hostname`); `user` null means the local user; `known_hosts` null means ~/.ssh/known_hosts;
`proxy_command` is the argv fleet runs, tokens expanded; `identity_files` lists every identity file
configured and `identity_file` the one fleet offers (null: ssh-agent and ~/.ssh/id_*); `refused`
says why fleet will not contact the host. `origins` maps each setting to where its value came from:
"inventory FILE:LINE", "ssh_config FILE:LINE", "ansible FILE: group G (VARIABLE)", "cli", or
"default".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from fleet.models import Host

HOSTS_SCHEMA = "fleet.hosts/1"
# document key → Host field, for the settings whose origin is reported
SETTINGS = {
    "transport": "transport",
    "hostname": "address",
    "port": "port",
    "user": "user",
    "jump": "jump",
    "proxy_command": "proxy_command",
    "identity_files": "identity_files",
    "identity_file": "identity_file",
    "identities_only": "identities_only",
    "known_hosts": "known_hosts",
    "python": "python",
    "connect_timeout": "connect_timeout",
    "probe_args": "probe_args",
    "slurm_node": "slurm_node",
}


class HostSelection(Protocol):
    """What hosts_document needs of fleet.api.Selection."""

    @property
    def hosts(self) -> Sequence[Host]: ...
    @property
    def source(self) -> str | None: ...
    @property
    def warnings(self) -> Sequence[str]: ...


def hosts_document(selection: HostSelection) -> dict[str, Any]:
    return {
        "schema": HOSTS_SCHEMA,
        "source": selection.source,
        "warnings": list(selection.warnings),
        "hosts": {host.name: host_entry(host) for host in selection.hosts},
    }


def host_entry(host: Host) -> dict[str, Any]:
    """One host's resolved settings, as in `fleet hosts --json FILE`."""
    entry: dict[str, Any] = {
        "transport": host.transport,
        "hostname": host.address,
        "port": host.port,
        "user": host.user,
        "jump": host.jump,
        "jump_host": _jump_host(host.jump_host),
        "proxy_command": list(host.proxy_command) if host.proxy_command else None,
        "identity_files": list(identity_paths(host)),
        "identity_file": host.identity_file,
        "identities_only": host.identities_only,
        "known_hosts": host.known_hosts,
        "python": host.python,
        "connect_timeout": host.connect_timeout,
        "groups": list(host.groups),
        "probe_args": dict(host.probe_args),
        "refused": host.refused,
        "origins": {key: host.origin(field) for key, field in SETTINGS.items()},
    }
    if host.slurm_node:  # optional: the Slurm node --drain/--resume act on (issue 48)
        entry["slurm_node"] = host.slurm_node
    return entry


def _jump_host(bastion: Host | None) -> dict[str, Any] | None:
    if bastion is None:
        return None
    return {
        "name": bastion.name,
        "hostname": bastion.address,
        "port": bastion.port,
        "user": bastion.user,
        "proxy_command": list(bastion.proxy_command) if bastion.proxy_command else None,
        "identity_file": bastion.identity_file,
        "known_hosts": bastion.known_hosts,
        "origins": {key: bastion.origin(SETTINGS[key]) for key in ("hostname", "port", "user")},
    }


def identity_paths(host: Host) -> Sequence[str]:
    """Every identity file configured for `host`, in order (identity_file: the one offered)."""
    if host.identity_files:
        return host.identity_files
    return (host.identity_file,) if host.identity_file else ()
