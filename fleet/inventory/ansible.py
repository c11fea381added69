"""Ansible inventories (INI, YAML, a dynamic script or a plugin config), read through Ansible's own
`ansible-inventory -i FILE --list --export`, run as a subprocess: fleet never imports ansible.

Variables are layered as Ansible does: `all`, then each group from the shallowest to the deepest
(ansible_group_priority, then name, breaking ties), then the host's own; a later layer replaces a
variable whole. Then each connection setting is read as Ansible's ssh connection plugin reads it:
where two names are set, the later one of its list wins (ansible_ssh_host over ansible_host,
ansible_ssh_port over ansible_port, ansible_ssh_user, ansible_ssh_private_key_file), and the ssh
command line it builds is read as ssh reads it (fleet/inventory/openssh/): ssh_args,
then `-o Port=` (the port variable), `-o IdentityFile=`, `-o User=`, then ansible_ssh_common_args
and ansible_ssh_extra_args, the first value of each option winning. So `-o ProxyJump=`, `-J`,
`-o ProxyCommand=`, `-o UserKnownHostsFile=`, `-p`, `-l`, `-i`
and the like are honoured. Whatever else there changes where or how ssh connects and fleet cannot
do it (`-F`, a bind address, an option ssh does not know, a ProxyCommand that needs a shell, a
Jinja template) refuses that host, naming file, group or host, and variable: it is kept, listed,
and never contacted (fleet/inventory/resolve.py). Options that change neither (-C, -v,
ControlPersist, StrictHostKeyChecking: fleet checks host keys strictly anyway) are left out.

ansible_python_interpreter: a path or a command name; `/usr/bin/env NAME` is NAME found on the
host's PATH (what env does, and what fleet's launcher does with a bare name); `auto`,
`auto_silent`, `auto_legacy` and `auto_legacy_silent` are fleet's own choice (python3 on PATH). An
interpreter with arguments refuses that host only. `fleet_<setting>` variables (fleet_probe_args,
fleet_python, …) carry fleet's own settings and win. A host whose ansible_connection fleet does not
speak is kept, and ends with a message saying so (transport `unsupported:<connection>`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, replace
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
from fleet.inventory.openssh import OpenSsh
from fleet.models import Host
from fleet.yamlfile import Location

COMMAND = "ansible-inventory"
PACKAGE = "ansible-core"
TIMEOUT_S = 120
SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh")
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")
# The ssh connection plugin's variables for each setting: the last one set wins (its `vars` list).
CONNECTION_VARIABLES = {
    "address": ("ansible_host", "ansible_ssh_host"),
    "port": ("ansible_port", "ansible_ssh_port"),
    "user": ("ansible_user", "ansible_ssh_user"),
    "identity_file": ("ansible_private_key_file", "ansible_ssh_private_key_file"),
    "connect_timeout": ("ansible_ssh_timeout",),
}
SSH_ARGS = ("ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args")
PYTHON_VARIABLE = "ansible_python_interpreter"
AUTO_PYTHON = ("auto", "auto_silent", "auto_legacy", "auto_legacy_silent")
ENV_COMMANDS = ("/usr/bin/env", "/bin/env", "env")
SSH_EXECUTABLES = ("ssh", "/usr/bin/ssh", "/bin/ssh", "/usr/local/bin/ssh")


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


@dataclass(frozen=True)
class _Value:
    value: Any
    where: str  # "group gpu", "host gpu-03"


def _host(name: str, tree: _Tree, member_of: list[str], path: str) -> Host:
    here = _place(f"{path}: host {name}")
    if not NAME_RE.match(name):
        raise here.fail(f"{name!r} is not a valid host name for fleet (letters, digits, '.-_')")
    layers = [("group all", tree.groups.get("all", {}).get("vars") or {})]
    layers += [(f"group {g}", tree.groups[g].get("vars") or {}) for g in member_of]
    layers += [(f"host {name}", tree.hostvars.get(name) or {})]
    flat: dict[str, _Value] = {}
    for where, variables in layers:
        for variable, value in variables.items():
            flat[variable] = _Value(value, where)  # a later layer replaces the value whole
    try:
        return _AnsibleHost(name, path, flat, tuple(member_of)).build()
    except _Refusal as exc:
        return Host(name=name, address=name, groups=tuple(member_of), refused=str(exc))


class _Refusal(Exception):
    """What fleet cannot honour for one host: the host is refused, the inventory is not."""


class _AnsibleHost:
    """One host's flattened variables → a Host, as Ansible's ssh connection would reach it."""

    def __init__(self, name: str, path: str, flat: dict[str, _Value], groups: tuple[str, ...]):
        self.name, self.path, self.flat, self.groups = name, path, flat, groups
        self.settings: dict[str, Any] = {}
        self.origins: dict[str, str] = {}

    def place(self, variable: str) -> str:
        return f"{self.path}: {self.flat[variable].where}: {variable}"

    def origin(self, variable: str) -> str:
        return f"ansible {self.path}: {self.flat[variable].where} ({variable})"

    def value(self, variable: str) -> Any:
        """A variable's value; a Jinja template refuses the host (`--export` leaves it unrendered)."""
        value = self.flat[variable].value
        if isinstance(value, str) and ("{{" in value or "{%" in value):
            raise _Refusal(
                f"{self.place(variable)} {value!r} is a Jinja template: fleet reads "
                f"`{COMMAND} --export`, which leaves templates unrendered (write the value "
                f"itself for fleet, e.g. fleet_{_setting_of(variable)}=…)"
            )
        return value

    def last_set(self, variables: tuple[str, ...]) -> str | None:
        return next((v for v in reversed(variables) if v in self.flat), None)

    def set(self, setting: str, value: Any, origin: str) -> None:
        self.settings[setting] = value
        self.origins[setting] = origin

    def build(self) -> Host:
        transport = "ssh"
        if "ansible_connection" in self.flat:
            transport = _transport(str(self.value("ansible_connection")))
            self.set("transport", transport, self.origin("ansible_connection"))
        if transport == "ssh":
            self._connection()
        self._python()
        for setting in SETTINGS:
            if f"fleet_{setting}" in self.flat:
                self.set(setting, self.value(f"fleet_{setting}"), self.origin(f"fleet_{setting}"))
        settings = _normalise(self.settings, self)
        for key, value in settings.items():
            if key not in ("transport", "identities_only", "proxy_command", "identity_files"):
                try:
                    _check_setting(key, value, _place(self.origins[key].split(" ", 1)[1]))
                except InventoryError as exc:
                    raise _Refusal(exc.message) from exc
        host = host_from_settings(self.name, settings, self.groups, self.origins)
        extra = ("identities_only", "proxy_command", "identity_files")
        return replace(host, **{k: settings[k] for k in extra if settings.get(k) is not None})

    # --------------------------------------------------------------------------- ssh's view

    def _connection(self) -> None:
        executable = self.flat.get("ansible_ssh_executable")
        if (
            executable is not None
            and str(self.value("ansible_ssh_executable")) not in SSH_EXECUTABLES
        ):
            raise _Refusal(
                f"{self.place('ansible_ssh_executable')} {executable.value!r}: fleet connects "
                "with its own SSH client, not through another program"
            )
        destination = self.name
        chosen = self.last_set(CONNECTION_VARIABLES["address"])
        if chosen:
            destination = str(self.value(chosen))
            self.set("address", destination, self.origin(chosen))
        found = OpenSsh.command_line(self._ssh_command_line(), destination)
        if found.refused:
            raise _Refusal(found.refused)
        for setting, value, place in found.settings:
            self.set(setting, value, _origin_of(place))

    def _ssh_command_line(self) -> list[tuple[list[str], str]]:
        """The ssh options Ansible's ssh plugin passes (_build_command), in its order."""
        segments: list[tuple[list[str], str]] = []
        if "ansible_ssh_args" in self.flat:
            segments.append(self._split("ansible_ssh_args"))
        for setting, option in (
            ("port", "Port"),
            ("identity_file", "IdentityFile"),
            ("user", "User"),
        ):
            variable = self.last_set(CONNECTION_VARIABLES[setting])
            if variable is None or self.value(variable) is None:
                continue
            value = str(self.value(variable))
            if setting == "identity_file":
                value = os.path.expanduser(value)
            quoted = value if setting == "port" else f'"{value}"'
            segments.append((["-o", f"{option}={quoted}"], self.place(variable)))
        variable = self.last_set(CONNECTION_VARIABLES["connect_timeout"])
        if variable is not None:
            segments.append(
                (["-o", f"ConnectTimeout={self.value(variable)}"], self.place(variable))
            )
        for variable in SSH_ARGS[1:]:
            if self.flat.get(variable) and self.flat[variable].value:
                segments.append(self._split(variable))
        return segments

    def _split(self, variable: str) -> tuple[list[str], str]:
        """Ansible's _split_ssh_args: shlex words, stripped, empty ones dropped."""
        text = str(self.value(variable))
        try:
            words = [w.strip() for w in shlex.split(text) if w.strip()]
        except ValueError as exc:
            raise _Refusal(f"{self.place(variable)} {text!r}: {exc}") from exc
        return words, self.place(variable)

    # ---------------------------------------------------------------------------- python

    def _python(self) -> None:
        if PYTHON_VARIABLE not in self.flat:
            return
        value = self.value(PYTHON_VARIABLE)
        origin = self.origin(PYTHON_VARIABLE)
        if isinstance(value, str) and value.strip() in AUTO_PYTHON:
            self.origins["python"] = f"{origin}: {value.strip()}, fleet's own choice"
            return
        try:
            words = shlex.split(str(value))
        except ValueError as exc:
            raise _Refusal(f"{self.place(PYTHON_VARIABLE)} {value!r}: {exc}") from exc
        if len(words) == 2 and words[0] in ENV_COMMANDS and _plain_command(words[1]):
            self.set(
                "python", words[1], f"{origin}: {words[1]} on the host's PATH, as env finds it"
            )
        elif len(words) == 1:
            self.set("python", words[0], origin)
        else:
            raise _Refusal(
                f"{self.place(PYTHON_VARIABLE)} {value!r}: fleet starts the interpreter as one "
                "program, without arguments (write its path, e.g. /usr/bin/python3)"
            )


def _plain_command(word: str) -> bool:
    return bool(word) and not word.startswith("-") and "=" not in word


def _origin_of(place: str) -> str:
    """'hosts.ini: group gpu: ansible_ssh_common_args' → 'ansible hosts.ini: group gpu (…)'."""
    where, _, variable = place.rpartition(": ")
    return f"ansible {where} ({variable})"


def _setting_of(variable: str) -> str:
    for setting, names in CONNECTION_VARIABLES.items():
        if variable in names:
            return setting
    if variable == PYTHON_VARIABLE:
        return "python"
    return variable.removeprefix("fleet_").removeprefix("ansible_")


def _transport(connection: str) -> str:
    if connection in SSH_CONNECTIONS:
        return "ssh"
    if connection in LOCAL_CONNECTIONS:
        return "local"
    return f"unsupported:{connection}"


def _normalise(settings: dict[str, Any], host: _AnsibleHost) -> dict[str, Any]:
    """INI values arrive as text: ports as numbers, probe_args as JSON or YAML."""
    out = dict(settings)
    for key, value in settings.items():
        if key in ("port", "connect_timeout") and isinstance(value, str) and value.isdigit():
            out[key] = int(value)
        if key == "probe_args" and isinstance(value, str):
            out[key] = _structured(value, host)
    return out


def _structured(text: str, host: _AnsibleHost) -> Any:
    try:
        return yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        raise _Refusal(
            f"{host.place('fleet_probe_args')} {text!r} is not JSON or YAML: {exc}"
        ) from exc
