"""The last step of every inventory source: ~/.ssh/config filled in, jump hosts linked, local files
checked. Whatever described the hosts (fleet YAML, -H, Ansible), they leave here the same way."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from fleet.errors import InventoryError
from fleet.hostsets import compact_hosts
from fleet.inventory.fleet_yaml import JUMP_RE, Inventory, jump_spec_host
from fleet.inventory.ssh_config import SshConfig, apply_ssh_config
from fleet.models import Host

INHERITED = ("identity_file", "known_hosts", "connect_timeout", "identities_only")
EXPLICIT_KINDS = ("inventory", "ansible", "cli")


def resolve_hosts(inventory: Inventory, config: SshConfig | None) -> Inventory:
    """Apply `config` to every SSH host and to the jump hosts they name, then link each host to
    its jump host (one Host object per bastion, so the transport shares one connection)."""
    hosts = {name: apply_ssh_config(host, config) for name, host in inventory.hosts.items()}
    bastions: dict[str, Host] = {}
    linked = {name: _link_jump(host, hosts, bastions, config) for name, host in hosts.items()}
    return replace(inventory, hosts=linked)


def _link_jump(
    host: Host, hosts: Mapping[str, Host], bastions: dict[str, Host], config: SshConfig | None
) -> Host:
    if not host.jump or host.jump == host.name or host.transport != "ssh":
        return replace(host, jump=None, jump_host=None) if host.jump_host else host
    bastion = hosts.get(host.jump)
    if bastion is None:
        key = f"{host.jump} {host.identity_file} {host.known_hosts} {host.user}"
        if key not in bastions:
            bastions[key] = _spec_bastion(host, config)
        bastion = bastions[key]
    if bastion.jump and bastion.jump not in (bastion.name, host.jump):
        raise InventoryError(
            f"{_place(host, 'jump')}: jump host {host.jump!r} of {host.name!r} has a jump host "
            f"of its own ({bastion.jump}, from {bastion.origin('jump')})",
            hint="fleet tunnels through one jump host; give that host direct access",
        )
    return replace(host, jump_host=bastion)


def _spec_bastion(target: Host, config: SshConfig | None) -> Host:
    """A `[user@]host[:port]` jump spec as a Host: what the spec says, the target's credentials
    where they were written down, and the config's entry for the spec's host name."""
    assert target.jump
    match = JUMP_RE.match(target.jump)
    if not match:
        raise InventoryError(
            f"{_place(target, 'jump')}: jump host {target.jump!r} of {target.name!r} is not "
            "[user@]host[:port]",
            hint="write the jump host as [user@]host[:port]",
        )
    bastion = jump_spec_host(target.jump, target)
    kind = target.origin("jump")
    origins = {k: kind for k in ("user", "port") if match[k]}  # the address: a config alias too
    origins.update({k: target.origin(k) for k in (*INHERITED, "user") if _explicit(target, k)})
    bastion = replace(bastion, identities_only=target.identities_only, origins=origins)
    return apply_ssh_config(bastion, config, name=bastion.address)


def _explicit(host: Host, setting: str) -> bool:
    return host.origin(setting).split(" ")[0] in EXPLICIT_KINDS


def _place(host: Host, setting: str) -> str:
    origin = host.origin(setting)
    return origin.split(" ", 1)[1] if " " in origin else host.name


def check_identity_files(hosts: list[Host]) -> None:
    """A local identity_file that is not there is an inventory error, found before any host is
    contacted (ssh_config's IdentityFile lines are skipped when missing, as ssh does)."""
    missing: dict[tuple[str, str], list[str]] = {}
    for host in hosts:
        for each in (host, host.jump_host):
            if each and each.identity_file and not os.path.isfile(each.identity_file):
                place = _place(each, "identity_file")
                missing.setdefault((each.identity_file, place), []).append(host.name)
    if missing:
        (path, place), names = next(iter(missing.items()))
        raise InventoryError(
            f"{place}: identity_file {path} does not exist (hosts {compact_hosts(names)})",
            hint="fix the path, or remove identity_file to use ssh-agent and ~/.ssh/id_*",
        )
