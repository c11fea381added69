"""Ansible inventories (INI, YAML, a dynamic script or a plugin config), read through Ansible's own
`ansible-inventory -i FILE --list --export`, run as a subprocess: fleet never imports ansible.

Variables are layered as Ansible does: `all`, then each group from the shallowest to the deepest
(ansible_group_priority, then name, breaking ties), then the host's own. Mapped: ansible_host,
ansible_port, ansible_user, ansible_ssh_private_key_file, ansible_python_interpreter, and the
-J / -o ProxyJump= / -o UserKnownHostsFile= / -o Port= / -i parts of ansible_ssh_common_args and
ansible_ssh_extra_args. `fleet_<setting>` variables (fleet_probe_args, fleet_python, …) carry
fleet's own settings and win. A host whose ansible_connection fleet does not speak is kept, and
ends with a message saying so (transport `unsupported:<connection>`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from fleet.errors import FleetError, InventoryError
from fleet.inventory.fleet_yaml import (
    NAME_RE,
    SETTINGS,
    Inventory,
    _check_setting,
    host_from_settings,
)
from fleet.models import Host
from fleet.yamlfile import Location

COMMAND = "ansible-inventory"
PACKAGE = "ansible-core"
TIMEOUT_S = 120
SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh")
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")
# ansible variable → fleet setting (later names win: ansible_host over ansible_ssh_host)
VARIABLES = {
    "ansible_ssh_host": "address",
    "ansible_host": "address",
    "ansible_ssh_port": "port",
    "ansible_port": "port",
    "ansible_ssh_user": "user",
    "ansible_user": "user",
    "ansible_ssh_private_key_file": "identity_file",
    "ansible_private_key_file": "identity_file",
    "ansible_python_interpreter": "python",
}
SSH_ARGS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")
SSH_OPTIONS = {"proxyjump": "jump", "userknownhostsfile": "known_hosts", "port": "port"}


class _Place(Location):
    """Where an Ansible value came from: `hosts.ini: host gpu-03` (ansible-inventory gives no lines)."""

    def fail(self, message: str, context: str = "", hint: str = "") -> FleetError:
        return InventoryError(f"{self.path}: {message}", context=context, hint=hint)


def _place(text: str) -> _Place:
    return _Place(text, InventoryError)


def load_ansible_inventory(path: str) -> Inventory:
    """Run ansible-inventory on `path` and turn its JSON into fleet hosts and groups."""
    return parse_ansible_export(run_ansible_inventory(path), path)


def run_ansible_inventory(path: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",  # a file no plugin can read is an error,
        "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true",  # not a warning and no hosts
        "ANSIBLE_NOCOLOR": "1",
    }
    command = [COMMAND, "-i", path, "--list", "--export"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    except FileNotFoundError as exc:
        raise InventoryError(
            f"{path} is an Ansible inventory, and {COMMAND} is not installed",
            hint=f"pip install {PACKAGE} (fleet reads Ansible inventories through {COMMAND})",
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise InventoryError(
            f"{COMMAND} -i {path} did not finish within {TIMEOUT_S} s",
            hint="is it a dynamic inventory that waits on a network service?",
        ) from exc
    if done.returncode != 0:
        raise InventoryError(
            f"{COMMAND} cannot read {path}",
            context=_ansible_reason(done.stderr),
            hint="fix the inventory (ansible-inventory -i FILE --list shows the same), or "
            "pass --inventory-format fleet if it is a fleet inventory",
        )
    try:
        document: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise InventoryError(f"{COMMAND} -i {path} printed no JSON: {exc}") from exc
    return document


def _ansible_reason(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith("<<<") and "caused by" not in line]
    return " · ".join(dict.fromkeys(useful[-4:])) or "no message"


# ------------------------------------------------------------------------------------- mapping


@dataclass(frozen=True)
class _Tree:
    groups: dict[str, dict[str, Any]]  # the export minus _meta
    hostvars: dict[str, dict[str, Any]]

    def members(self, group: str, seen: frozenset[str] = frozenset()) -> list[str]:
        """The hosts of `group` and of its children, recursively."""
        spec = self.groups.get(group) or {}
        names = list(spec.get("hosts") or [])
        for child in spec.get("children") or []:
            if child not in seen:
                names += self.members(child, seen | {group})
        return list(dict.fromkeys(names))

    def depths(self) -> dict[str, int]:
        depth = {"all": 0}
        frontier = ["all"]
        while frontier:
            group = frontier.pop()
            for child in (self.groups.get(group) or {}).get("children") or []:
                if depth.get(child, -1) < depth[group] + 1 and depth[group] < len(self.groups):
                    depth[child] = depth[group] + 1
                    frontier.append(child)
        return depth


def parse_ansible_export(document: Mapping[str, Any], path: str) -> Inventory:
    """ansible-inventory's `--list --export` JSON → Inventory (names, groups, settings)."""
    meta = document.get("_meta") or {}
    tree = _Tree(
        groups={k: v or {} for k, v in document.items() if k != "_meta"},
        hostvars={k: v or {} for k, v in (meta.get("hostvars") or {}).items()},
    )
    names = list(dict.fromkeys([*tree.hostvars, *tree.members("all")]))
    if not names:
        raise InventoryError(
            f"{path}: the Ansible inventory has no hosts",
            hint=f"check it with: {COMMAND} -i {path} --graph",
        )
    groups = {g: tuple(tree.members(g)) for g in tree.groups if g != "all"}
    groups = {g: members for g, members in groups.items() if members}
    order = _group_order(tree)
    hosts = {}
    for name in names:
        member_of = [g for g in order if name in groups.get(g, ())]
        hosts[name] = _host(name, tree, member_of, path)
    return Inventory(path=path, hosts=hosts, groups=groups)


def _group_order(tree: _Tree) -> list[str]:
    """Groups as Ansible layers their variables: shallow first, then priority, then name."""
    depths = tree.depths()

    def key(group: str) -> tuple[int, int, str]:
        priority = (tree.groups[group].get("vars") or {}).get("ansible_group_priority", 1)
        return depths.get(group, 1), int(priority), group

    return sorted((g for g in tree.groups if g != "all"), key=key)


def _host(name: str, tree: _Tree, member_of: list[str], path: str) -> Host:
    here = _place(f"{path}: host {name}")
    if not NAME_RE.match(name):
        raise here.fail(f"{name!r} is not a valid host name for fleet (letters, digits, '.-_')")
    settings: dict[str, Any] = {}
    origins: dict[str, str] = {}
    layers = [("group all", tree.groups.get("all", {}).get("vars") or {})]
    layers += [(f"group {g}", tree.groups[g].get("vars") or {}) for g in member_of]
    layers += [(f"host {name}", tree.hostvars.get(name) or {})]
    for where, variables in layers:
        for setting, value in _settings(variables, _place(f"{path}: {where}")).items():
            settings[setting] = value
            origins[setting] = f"ansible {path}: {where}"
    return _build_host(name, settings, origins, tuple(member_of), here)


def _settings(variables: Mapping[str, Any], here: _Place) -> dict[str, Any]:
    """One layer's variables as fleet settings (fleet_* last: they win)."""
    found: dict[str, Any] = {}
    for variable, setting in VARIABLES.items():
        if variable in variables:
            found[setting] = variables[variable]
    for variable in SSH_ARGS:
        if variables.get(variable):
            found.update(ssh_args_settings(str(variables[variable]), here, variable))
    if "ansible_connection" in variables:
        found["transport"] = _transport(str(variables["ansible_connection"]))
    for setting in SETTINGS:
        if f"fleet_{setting}" in variables:
            found[setting] = variables[f"fleet_{setting}"]
    return found


def ssh_args_settings(text: str, here: _Place, variable: str) -> dict[str, Any]:
    """The parts of an ssh command line fleet understands: -J, -i, -o ProxyJump/UserKnownHostsFile/Port."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise here.fail(f"{variable} {text!r}: {exc}") from exc
    found: dict[str, Any] = {}
    pairs = _flag_pairs(words)
    for flag, value in pairs:
        if flag == "-J":
            found["jump"] = value
        elif flag == "-i":
            found["identity_file"] = value
        elif flag == "-o":
            option, _, setting_value = value.replace(" ", "=", 1).partition("=")
            if option.lower() in SSH_OPTIONS:
                found[SSH_OPTIONS[option.lower()]] = setting_value.strip()
    return found


def _flag_pairs(words: list[str]) -> list[tuple[str, str]]:
    """`-o X=1 -J b -oY=2` → [('-o', 'X=1'), ('-J', 'b'), ('-o', 'Y=2')]."""
    pairs = []
    index = 0
    while index < len(words):
        word = words[index]
        if word[:2] in ("-o", "-J", "-i") and len(word) > 2:
            pairs.append((word[:2], word[2:]))
        elif word in ("-o", "-J", "-i") and index + 1 < len(words):
            pairs.append((word, words[index + 1]))
            index += 1
        index += 1
    return pairs


def _transport(connection: str) -> str:
    if connection in SSH_CONNECTIONS:
        return "ssh"
    if connection in LOCAL_CONNECTIONS:
        return "local"
    return f"unsupported:{connection}"


def _build_host(
    name: str,
    settings: dict[str, Any],
    origins: dict[str, str],
    groups: tuple[str, ...],
    here: _Place,
) -> Host:
    settings = _normalise(settings, here)
    for key, value in settings.items():
        if key != "transport":  # derived from ansible_connection, not a fleet setting to check
            _check_setting(key, value, _place(origins[key].split(" ", 1)[1]))
    shown = {k: v for k, v in origins.items() if k in settings}
    return host_from_settings(name, settings, groups, shown)


def _normalise(settings: dict[str, Any], here: _Place) -> dict[str, Any]:
    """INI values arrive as text: ports as numbers, probe_args as JSON or YAML; templates refused."""
    out = dict(settings)
    for key, value in settings.items():
        if isinstance(value, str) and "{{" in value:
            raise here.fail(
                f"{key} {value!r} is a Jinja template: fleet reads `{COMMAND} --export`, "
                "which leaves templates unrendered",
                hint=f"write the value itself for fleet, e.g. fleet_{key}=…",
            )
        if key in ("port", "connect_timeout") and isinstance(value, str) and value.isdigit():
            out[key] = int(value)
        if key == "probe_args" and isinstance(value, str):
            out[key] = _structured(value, here)
        if key == "python" and isinstance(value, str) and value.startswith("auto"):
            out.pop(key)  # ansible's interpreter discovery: fleet's default python3
    return out


def _structured(text: str, here: _Place) -> Any:
    try:
        return yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        raise here.fail(f"fleet_probe_args {text!r} is not JSON or YAML: {exc}") from exc
