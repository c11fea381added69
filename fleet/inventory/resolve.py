"""The last step of every inventory source: ~/.ssh/config filled in, jump hosts linked, local files
checked. Whatever described the hosts (fleet YAML, -H, Ansible), they leave here the same way."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from fleet.errors import InventoryError
from fleet.hostsets import compact_hosts
from fleet.inventory.fleet_yaml import JUMP_RE, Inventory, jump_spec_host
from fleet.models import Host

if TYPE_CHECKING:
    from fleet.inventory.openssh import OpenSsh

INHERITED = ("identity_file", "known_hosts", "connect_timeout", "identities_only")
EXPLICIT_KINDS = ("inventory", "ansible", "cli")


def resolve_hosts(inventory: Inventory, config: OpenSsh | None) -> Inventory:
    """Apply `config` to every SSH host and to the jump hosts they name, fill in ProxyCommand
    tokens, then link each host to its jump host (one Host object per bastion, so the transport
    shares one connection). A host fleet cannot reach as ssh would is kept, `refused`.
    Without SSH hosts there is nothing to apply or link: the inventory as it is."""
    if not any(host.transport == "ssh" for host in inventory.hosts.values()):
        return _without_jumps(inventory)
    from fleet.inventory.openssh import OpenSsh

    config = config or OpenSsh()
    hosts = {name: config.apply(host) for name, host in inventory.hosts.items()}
    bastions: dict[str, Host] = {}
    linked = {name: _link_jump(host, hosts, bastions, config) for name, host in hosts.items()}
    return replace(inventory, hosts=linked)


def _without_jumps(inventory: Inventory) -> Inventory:
    """What _link_jump makes of hosts that are not SSH: no jump host."""
    hosts = {
        name: replace(host, jump=None, jump_host=None) if host.jump_host else host
        for name, host in inventory.hosts.items()
    }
    return replace(inventory, hosts=hosts)


def _link_jump(
    host: Host, hosts: Mapping[str, Host], bastions: dict[str, Host], config: OpenSsh
) -> Host:
    if not host.jump or host.jump == host.name or host.transport != "ssh":
        return replace(host, jump=None, jump_host=None) if host.jump_host else host
    if host.refused:
        return host
    bastion = hosts.get(host.jump)
    if bastion is None:
        key = f"{host.jump} {host.identity_file} {host.known_hosts} {host.user}"
        if key not in bastions:
            bastions[key] = _spec_bastion(host, config)
        bastion = bastions[key]
    if bastion.refused:
        return replace(host, refused=f"jump host {host.jump}: {bastion.refused}")
    if bastion.jump and bastion.jump not in (bastion.name, host.jump):
        return replace(
            host,
            refused=f"{_place(host, 'jump')}: jump host {host.jump!r} of {host.name!r} has a jump "
            f"host of its own ({bastion.jump}, from {bastion.origin('jump')}); fleet tunnels "
            "through one jump host",
        )
    return replace(host, jump_host=bastion)


def _spec_bastion(target: Host, config: OpenSsh) -> Host:
    """A `[user@]host[:port]` jump spec as a Host: what the spec says, the target's credentials
    where they were written down, and the config's entry for the spec's host name."""
    assert target.jump
    match = JUMP_RE.match(target.jump)
    if not match:
        return replace(
            target,
            name=target.jump,
            refused=f"{_place(target, 'jump')}: jump host {target.jump!r} of {target.name!r} is "
            "not [user@]host[:port]",
        )
    bastion = jump_spec_host(target.jump, target)
    kind = target.origin("jump")
    origins = {k: kind for k in ("user", "port") if match[k]}  # the address: a config alias too
    origins.update({k: target.origin(k) for k in (*INHERITED, "user") if _explicit(target, k)})
    bastion = replace(bastion, identities_only=target.identities_only, origins=origins)
    return config.apply(bastion, name=bastion.address)


def _explicit(host: Host, setting: str) -> bool:
    return host.origin(setting).split(" ")[0] in EXPLICIT_KINDS


def _place(host: Host, setting: str) -> str:
    origin = host.origin(setting)
    return origin.split(" ", 1)[1] if " " in origin else host.name


def check_identity_files(hosts: list[Host]) -> None:
    """What must hold before any host is contacted (an InventoryError otherwise; `fleet hosts`
    shows it as a warning): no selected host is refused (a setting that changes where or how ssh
    would connect, which fleet cannot honour), and a local identity_file is there (ssh_config's
    IdentityFile lines are skipped when missing, as ssh does)."""
    refuse_hosts(hosts)
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


def refuse_hosts(hosts: list[Host]) -> None:
    """An InventoryError naming every refused host among `hosts` and what fleet cannot honour."""
    refused = [h for h in hosts if h.refused]
    if not refused:
        return
    names = compact_hosts([h.name for h in refused])
    lines = [f"{h.name}: {h.refused}".replace("\n", "\n    ") for h in refused[:MAX_LISTED]]
    if len(refused) > MAX_LISTED:
        lines.append(f"… and {len(refused) - MAX_LISTED} more")
    first = refused[0]
    raise InventoryError(
        f"fleet will not contact {names}: it cannot honour how they are to be reached\n  "
        + "\n  ".join(lines),
        hint=f"fix the setting, or leave the host out: --limit '!{first.name}'",
    )


MAX_LISTED = 10
