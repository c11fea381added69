"""-H/--hosts NODESET: hosts named on the command line, as with `pdsh -w` or `clush -w`.

Their settings come from the command line (--user, --port, --python, --jump, --identity,
--known-hosts), then from ~/.ssh/config (applied later, for every source), then from fleet's
defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from fleet.errors import InventoryError, UsageError
from fleet.inventory.fleet_yaml import ADDRESS_RE, JUMP_RE, NAME_RE, USER_RE, Inventory
from fleet.inventory.nodeset import expand_hostlist
from fleet.models import Host


@dataclass(frozen=True)
class AdhocSettings:
    """The -H companions; None: not given."""

    user: str | None = None
    port: int | None = None
    python: str | None = None
    jump: str | None = None
    identity_file: str | None = None  # --identity FILE: the key to offer
    known_hosts: str | None = None  # --known-hosts FILE: instead of ~/.ssh/known_hosts

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}

    def flags(self) -> list[str]:
        """The command-line flags of the settings given, e.g. ['--user', '--identity']."""
        return [FLAGS.get(k, f"--{k}") for k in self.given()]


FLAGS = {"identity_file": "--identity", "known_hosts": "--known-hosts"}


def adhoc_inventory(nodeset: str, settings: AdhocSettings | None = None) -> Inventory:
    """The hosts `nodeset` names, each reached by its name unless ~/.ssh/config says otherwise."""
    given = (settings or AdhocSettings()).given()
    _check_given(given)
    for key in ("identity_file", "known_hosts"):  # whole paths: hints and ssh work from anywhere
        if key in given:
            given[key] = os.path.abspath(os.path.expanduser(given[key]))
    try:
        names = expand_hostlist(nodeset)
    except InventoryError as exc:
        raise UsageError(f"-H {exc.message}", hint=exc.hint) from exc
    hosts = {}
    for name in names:
        if not NAME_RE.match(name):
            raise UsageError(f"-H: {name!r} is not a valid host name (letters, digits, '.-_')")
        hosts[name] = Host(name=name, address=name, origins=dict.fromkeys(given, "cli"), **given)
    return Inventory(path=f"-H {nodeset}", hosts=hosts, groups={})


def _check_given(given: dict[str, Any]) -> None:
    for key in ("identity_file", "known_hosts"):
        path = given.get(key)
        if path is not None and not os.path.isfile(os.path.expanduser(path)):
            raise UsageError(f"{FLAGS[key]} {path}: no such file")
    user, jump = given.get("user"), given.get("jump")
    if user is not None and not USER_RE.match(user):
        raise UsageError(f"--user {user!r} is not a valid user name")
    if jump is not None:
        match = JUMP_RE.match(jump)
        if not match or not ADDRESS_RE.match(match["host"].strip("[]")) or jump.startswith("-"):
            raise UsageError(f"--jump {jump!r} is not [user@]host[:port]")
