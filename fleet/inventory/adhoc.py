"""-H/--hosts NODESET: hosts named on the command line, as with `pdsh -w` or `clush -w`.

Their settings come from the command line (--user, --port, --python, --jump), then from
~/.ssh/config (applied later, for every source), then from fleet's defaults.
"""

from __future__ import annotations

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

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


def adhoc_inventory(nodeset: str, settings: AdhocSettings | None = None) -> Inventory:
    """The hosts `nodeset` names, each reached by its name unless ~/.ssh/config says otherwise."""
    given = (settings or AdhocSettings()).given()
    _check_given(given)
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
    user, jump = given.get("user"), given.get("jump")
    if user is not None and not USER_RE.match(user):
        raise UsageError(f"--user {user!r} is not a valid user name")
    if jump is not None:
        match = JUMP_RE.match(jump)
        if not match or not ADDRESS_RE.match(match["host"].strip("[]")) or jump.startswith("-"):
            raise UsageError(f"--jump {jump!r} is not [user@]host[:port]")
