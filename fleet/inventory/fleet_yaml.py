"""Inventory YAML → validated hosts. Every error names file:line and the offending value.

Nothing here touches the network: an inventory is fully checked before any host is contacted.
Precedence of settings: host > group vars (later groups win) > defaults.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fleet.errors import InventoryError, UsageError
from fleet.inventory.nodeset import expand_hostlist, split_top_level
from fleet.models import Host
from fleet.yamlfile import LocatedDict, Location

SETTINGS = (
    "address",
    "user",
    "port",
    "identity_file",
    "known_hosts",
    "python",
    "jump",
    "connect_timeout",
    "transport",
    "probe_args",
    "slurm_node",
)
TOP_LEVEL = ("defaults", "hosts", "groups", "cohort_by", "ssh_exec")
GROUP_KEYS = ("hosts", "vars")
TRANSPORTS = ("ssh", "local")
NULLABLE = ("jump", "user", "identity_file")  # `jump: null` on the bastion undoes a default

# Conservative on purpose: these values reach an SSH command line or a socket, never a shell,
# but a name like `-oProxyCommand=…` or `a;rm` is a mistake or an attack either way.
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,252}$")
USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
ADDRESS_RE = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9._-]{0,252}|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.%]*)$")
PYTHON_RE = re.compile(r"^[A-Za-z0-9_./+~][A-Za-z0-9_./+~-]*$")
JUMP_RE = re.compile(
    r"^(?:(?P<user>[^@:]+)@)?(?P<host>[^@:\[\]]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d+))?$"
)


@dataclass(frozen=True)
class Inventory:
    path: str
    hosts: Mapping[str, Host]
    groups: Mapping[str, tuple[str, ...]]
    # a JMESPath over each host's document naming its cohort for the diff (`cohort_by:`, top
    # level); recorded in the run, so a saved run is diffed the same way. None: the default
    cohort_by: str | None = None
    # `ssh_exec: false` (top level): run no ~/.ssh/config `Match exec` command (as --no-ssh-exec)
    ssh_exec: bool = True

    def select(self, limit: str | None) -> list[Host]:
        """The hosts that `--limit` selects, in inventory order."""
        names = select_names(list(self.hosts), self.groups, limit)
        return [self.hosts[n] for n in names]


# ---------------------------------------------------------------------------------------- loading


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    path = str(path)
    try:
        text = _read_text(path)
    except FileNotFoundError as exc:
        raise InventoryError(
            f"inventory file {path} does not exist",
            hint="pass an existing file with -i, e.g. -i inventory/local.yaml",
        ) from exc
    except OSError as exc:
        raise InventoryError(f"cannot read inventory {path}: {exc.strerror}") from exc
    return parse_inventory(text, path)


MAX_INVENTORY_BYTES = 8 * 1024 * 1024  # 100,000 hosts fit; YAML parsing 50 MB would take minutes


def _read_text(path: str) -> str:
    with open(path, "rb") as handle:
        data = handle.read(MAX_INVENTORY_BYTES + 1)
    if len(data) > MAX_INVENTORY_BYTES:
        raise InventoryError(
            f"{path}:1: the inventory is larger than {MAX_INVENTORY_BYTES // (1024 * 1024)} MB",
            hint="is it the right file? host ranges (gpu-[001-999]) keep big fleets short",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InventoryError(
            f"{path}:{line}: byte 0x{data[exc.start]:02x} is not UTF-8 text",
            hint="save the inventory as UTF-8",
        ) from exc


def parse_inventory(text: str, path: str = "<inventory>") -> Inventory:
    where = Location(path, InventoryError)
    document = where.parse(text, hint="check the indentation and quoting near that line")
    return inventory_from_document(document, where)


def inventory_from_document(document: Any, where: Location) -> Inventory:
    """The inventory a parsed YAML document (LocatedDicts: their lines) describes."""
    path = where.path
    if document is None:
        raise InventoryError(f"{path}:1: the inventory is empty", hint="add a 'hosts:' mapping")
    _require_mapping(document, where, "the inventory")
    _check_keys(document, TOP_LEVEL, where, "top level")
    defaults = document.get("defaults") or LocatedDict()
    _require_mapping(defaults, where.at(document, "defaults"), "defaults")
    _check_settings(defaults, where)
    raw_hosts = _expand_hosts(document, where)
    groups, group_vars = _parse_groups(document, raw_hosts, where)
    hosts = {
        name: _resolve_host(name, raw, defaults, groups, group_vars, where)
        for name, raw in raw_hosts.items()
    }
    _check_jumps(hosts, where, raw_hosts)
    hosts = {name: _with_jump_host(host, hosts) for name, host in hosts.items()}
    return Inventory(
        path=path,
        hosts=hosts,
        groups=groups,
        cohort_by=_cohort_by(document, where),
        ssh_exec=_ssh_exec(document, where),
    )


def _ssh_exec(document: LocatedDict, where: Location) -> bool:
    """`ssh_exec:` true (the default) or false: whether ~/.ssh/config's Match exec commands run."""
    value = document.get("ssh_exec", True)
    if not isinstance(value, bool):
        raise where.at(document, "ssh_exec").fail(
            f"ssh_exec must be true or false, not {value!r}",
            hint="ssh_exec: false runs no Match exec command of ~/.ssh/config",
        )
    return value


# ------------------------------------------------------------------------------------- structure


def _cohort_by(document: LocatedDict, where: Location) -> str | None:
    """The `cohort_by:` JMESPath, checked here (file:line) rather than at the first diff."""
    if "cohort_by" not in document or document["cohort_by"] is None:
        return None
    value = document["cohort_by"]
    here = where.at(document, "cohort_by")
    if not isinstance(value, str) or not value.strip():
        raise here.fail(
            f"cohort_by must be a JMESPath expression (text), not {value!r}",
            hint="e.g. cohort_by: gpu.gpus[0].name",
        )
    import jmespath  # only for an inventory that has cohort_by
    from jmespath.exceptions import JMESPathError

    try:
        jmespath.compile(value)
    except JMESPathError as exc:
        raise here.fail(
            f"cohort_by {value!r} is not a JMESPath expression: {exc}",
            hint="quote it in YAML when it starts with [ or {: cohort_by: '[gpu.gpus[0].name, gpu.interconnect]'",
        ) from exc
    return value


def _require_mapping(value: Any, where: Location, what: str) -> None:
    if not isinstance(value, dict):
        raise where.fail(f"{what} must be a mapping (key: value), not {type(value).__name__}")


def _check_keys(mapping: LocatedDict, allowed: Iterable[str], where: Location, what: str) -> None:
    allowed = tuple(allowed)
    for key in mapping:
        if key not in allowed:
            raise where.at(mapping, key).fail(
                f"unknown key {key!r} in {what}", hint="valid keys: " + ", ".join(allowed)
            )


def _expand_hosts(document: LocatedDict, where: Location) -> dict[str, LocatedDict]:
    raw = document.get("hosts")
    if not raw:
        raise where.at(document, "hosts").fail("no hosts defined", hint="add a 'hosts:' mapping")
    _require_mapping(raw, where.at(document, "hosts"), "hosts")
    hosts: dict[str, LocatedDict] = {}
    for pattern, settings in raw.items():
        here = where.at(raw, pattern)
        _check_key_is_text(pattern, here, "host")
        settings = LocatedDict() if settings is None else settings
        _require_mapping(settings, here, f"host {pattern!r}")
        _check_settings(settings, where)
        for name in expand_hostlist(str(pattern), here):
            if name in hosts:
                raise here.fail(f"host {name!r} is defined twice")
            check_name(name, here, "host")
            hosts[name] = settings
    return hosts


def _parse_groups(
    document: LocatedDict, hosts: Mapping[str, Any], where: Location
) -> tuple[dict[str, tuple[str, ...]], dict[str, LocatedDict]]:
    raw = document.get("groups") or LocatedDict()
    _require_mapping(raw, where.at(document, "groups"), "groups")
    members: dict[str, tuple[str, ...]] = {}
    group_vars: dict[str, LocatedDict] = {}
    for group, spec in raw.items():
        here = where.at(raw, group)
        _check_key_is_text(group, here, "group")
        check_name(str(group), here, "group")
        if str(group) in hosts:
            raise here.fail(f"group {group!r} has the name of a host", hint="rename one of them")
        spec = LocatedDict() if spec is None else spec
        _require_mapping(spec, here, f"group {group!r}")
        _check_keys(spec, GROUP_KEYS, where, f"group {group!r}")
        members[str(group)] = _group_members(str(group), spec, hosts, where)
        group_vars[str(group)] = spec.get("vars") or LocatedDict()
        _require_mapping(group_vars[str(group)], where.at(spec, "vars"), f"vars of group {group!r}")
        _check_settings(group_vars[str(group)], where)
    return members, group_vars


def _group_members(
    group: str, spec: LocatedDict, hosts: Mapping[str, Any], where: Location
) -> tuple[str, ...]:
    here = where.at(spec, "hosts")
    patterns = spec.get("hosts") or []
    if isinstance(patterns, str):
        patterns = [patterns]
    if not isinstance(patterns, list):
        raise here.fail(f"'hosts' of group {group!r} must be a list of host names")
    names: list[str] = []
    for pattern in patterns:
        for name in expand_hostlist(str(pattern), here):
            if name not in hosts:
                raise here.fail(
                    f"group {group!r} lists host {name!r}, which is not under hosts:",
                    hint="define the host under 'hosts:' first",
                )
            names.append(name)
    return tuple(dict.fromkeys(names))


# --------------------------------------------------------------------------------------- settings


def _check_settings(settings: LocatedDict, where: Location) -> None:
    _check_keys(settings, SETTINGS, where, "host settings")
    for key, value in settings.items():
        _check_setting(key, value, where.at(settings, key))


def _check_setting(key: str, value: Any, here: Location) -> None:
    if value is None and key in NULLABLE:
        return
    if key in ("port", "connect_timeout"):
        _check_number_setting(key, value, here)
    elif key == "transport":
        if value not in TRANSPORTS:
            raise here.fail(f"transport {value!r} is not one of: {', '.join(TRANSPORTS)}")
    elif key == "probe_args":
        _check_probe_args(value, here)
    else:
        _check_text_setting(key, value, here)


def _check_number_setting(key: str, value: Any, here: Location) -> None:
    """`port` (1–65535) and `connect_timeout` (seconds, above 0); a YAML `true` is no number."""
    if key == "port":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            raise here.fail(f"port {value!r} is outside 1–65535")
    elif isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise here.fail(f"connect_timeout {value!r} must be a positive number of seconds")


def _check_probe_args(value: Any, here: Location) -> None:
    if not isinstance(value, dict):
        raise here.fail("probe_args must map probe names to their options")
    for probe, options in value.items():
        if options is not None and not isinstance(options, dict):
            raise here.fail(
                f"probe_args of {probe!r} must map option names to values, not {options!r}"
            )


def _check_text_setting(key: str, value: Any, here: Location) -> None:
    if not isinstance(value, str) or not value:
        raise here.fail(f"{key} must be a non-empty string, not {value!r}")
    if key == "user":
        check_name(value, here, "user", USER_RE)
    elif key == "address":
        check_name(value, here, "address", ADDRESS_RE)
    elif key == "slurm_node":
        check_name(value, here, "slurm_node", NAME_RE)
    elif key == "python":
        check_name(
            value,
            here,
            "python",
            PYTHON_RE,
            allowed="letters, digits, '/', '.', '_', '+', '~', '-'",
        )
    elif key == "jump":
        match = JUMP_RE.match(value)
        user, host = (match["user"], match["host"].strip("[]")) if match else (None, "")
        if (
            not match
            or _unsafe(value)
            or (user and not USER_RE.match(user))
            or not ADDRESS_RE.match(host)
            or _unsafe(host)
        ):
            raise here.fail(f"jump {value!r} is not a host of this inventory or user@host:port")
    elif _unsafe(value):
        raise here.fail(f"{key} {value!r} contains control characters")


def _check_key_is_text(key: Any, here: Location, what: str) -> None:
    """YAML reads unquoted on/off/yes/no/true/false/null as values: `on:` would be host True."""
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise here.fail(
            f"{what} name {key!r} is not text: YAML reads it as {type(key).__name__}",
            hint="quote the name, e.g. 'on': {} or 'no': {}",
        )


# whitespace (what str.isspace() calls so: re's \s for text) and control characters
UNSAFE_CHARACTER = re.compile(r"[\s\x00-\x1f\x7f]")


def _unsafe(value: str) -> bool:
    return value.startswith("-") or UNSAFE_CHARACTER.search(value) is not None


def check_name(
    value: str,
    here: Location,
    what: str,
    pattern: re.Pattern[str] = NAME_RE,
    allowed: str = "letters, digits, '.', '-', '_' only; not starting with '-'",
) -> None:
    if not pattern.match(value) or _unsafe(value):
        raise here.fail(f"{what} {value!r} is not a valid {what} name ({allowed})")


def _merge(defaults: Mapping[str, Any], *layers: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(defaults)
    args = dict(defaults.get("probe_args") or {})
    for layer in layers:
        merged.update(layer)
        merged = {k: v for k, v in merged.items() if v is not None}
        for probe, options in (layer.get("probe_args") or {}).items():
            args[probe] = {**(args.get(probe) or {}), **(options or {})}
    merged["probe_args"] = args
    return merged


def _resolve_host(
    name: str,
    raw: LocatedDict,
    defaults: LocatedDict,
    groups: Mapping[str, tuple[str, ...]],
    group_vars: Mapping[str, LocatedDict],
    where: Location,
) -> Host:
    member_of = tuple(g for g, members in groups.items() if name in members)
    layers = [defaults, *(group_vars[g] for g in member_of), raw]
    settings = _merge(*layers)
    return host_from_settings(name, settings, member_of, _origins(layers, where))


def host_from_settings(
    name: str, settings: Mapping[str, Any], groups: tuple[str, ...], origins: Mapping[str, str]
) -> Host:
    """A Host from checked settings (any inventory source), the defaults filled in, ~ expanded
    on the controller."""
    return Host(
        name=name,
        address=settings.get("address", name),
        port=settings.get("port", 22),
        user=settings.get("user"),
        identity_file=_expand_path(settings.get("identity_file")),
        known_hosts=_expand_path(settings.get("known_hosts")),
        python=settings.get("python", "python3"),
        jump=settings.get("jump"),
        connect_timeout=float(settings.get("connect_timeout", 10)),
        transport=settings.get("transport", "ssh"),
        groups=groups,
        probe_args=settings.get("probe_args") or {},
        slurm_node=settings.get("slurm_node"),
        origins=dict(origins),
    )


def _origins(layers: list[LocatedDict], where: Location) -> dict[str, str]:
    """Each setting's file:line: the last layer that sets it (`jump: null` too: written is written)."""
    origins = {}
    for layer in layers:
        # as where.at(layer, key).line: a LocatedDict's lines (one made empty has no key_lines),
        # else the file's
        lines, default = getattr(layer, "key_lines", {}), getattr(layer, "line", where.line)
        for key in layer:  # without a Location per key
            origins[key] = f"inventory {where.path}:{lines.get(key, default)}"
    return origins


def _expand_path(value: str | None) -> str | None:
    return os.path.expanduser(value) if value else None


def _check_jumps(
    hosts: Mapping[str, Host], where: Location, raw: Mapping[str, LocatedDict]
) -> None:
    for host in hosts.values():
        if not host.jump:
            continue
        if host.jump == host.name:
            raise where.at(raw[host.name]).fail(f"host {host.name!r} uses itself as jump host")
        if host.jump in hosts:
            if hosts[host.jump].jump:
                raise where.at(raw[host.name]).fail(
                    f"jump host {host.jump!r} of {host.name!r} has a jump host of its own",
                    hint="fleet tunnels through one bastion; chain jumps in ~/.ssh/config instead",
                )
            continue
        if "@" not in host.jump and ":" not in host.jump:
            raise where.at(raw[host.name]).fail(
                f"jump host {host.jump!r} of {host.name!r} is not a host of this inventory",
                hint="define it under hosts:, or write it as user@host:port",
            )


def _with_jump_host(host: Host, hosts: Mapping[str, Host]) -> Host:
    if not host.jump:
        return host
    bastion = hosts.get(host.jump) or jump_spec_host(host.jump, host)
    return replace(host, jump_host=bastion)


def jump_spec_host(jump: str, target: Host) -> Host:
    """A `user@host:port` jump spec as a Host; credentials default to the target's."""
    match = JUMP_RE.match(jump)
    assert match, jump  # validated by _check_text_setting
    return Host(
        name=jump,
        address=match["host"].strip("[]"),
        port=int(match["port"] or 22),
        user=match["user"] or target.user,
        identity_file=target.identity_file,
        known_hosts=target.known_hosts,
        connect_timeout=target.connect_timeout,
    )


# ---------------------------------------------------------------------------------------- --limit


def select_names(
    hosts: list[str], groups: Mapping[str, tuple[str, ...]], limit: str | None
) -> list[str]:
    """Apply `--limit`: comma-separated nodesets or globs over host and group names, `!` excludes.

    A pattern is a group name, a nodeset (`gpu-[01-04]`: the hosts it names that exist), or else
    a glob (`gpu-0[12]`, `h200-*`)."""
    if not limit:
        return list(hosts)
    patterns = split_top_level(limit)
    include = [p for p in patterns if not p.startswith("!")]
    exclude = [p[1:] for p in patterns if p.startswith("!")]
    chosen = set(hosts) if not include else set()
    for pattern in include:
        chosen |= _match(pattern, hosts, groups)
    for pattern in exclude:
        chosen -= _match(pattern, hosts, groups)
    return [h for h in hosts if h in chosen]


def _match(pattern: str, hosts: list[str], groups: Mapping[str, tuple[str, ...]]) -> set[str]:
    matched = _nodeset_match(pattern, hosts, groups) or _glob_match(pattern, hosts, groups)
    if not matched:
        known = ", ".join(list(groups) + hosts[:10]) + (" …" if len(hosts) > 10 else "")
        raise UsageError(
            f"--limit pattern {pattern!r} matches no host or group",
            hint=f"groups and hosts: {known}",
        )
    return matched


def _nodeset_match(
    pattern: str, hosts: list[str], groups: Mapping[str, tuple[str, ...]]
) -> set[str]:
    try:
        names = expand_hostlist(pattern)
    except InventoryError:
        return set()  # not a nodeset: maybe a glob
    known = set(hosts)
    matched = {n for n in names if n in known}
    for name in names:
        matched |= set(groups.get(name, ()))
    return matched


def _glob_match(pattern: str, hosts: list[str], groups: Mapping[str, tuple[str, ...]]) -> set[str]:
    matched = {h for h in hosts if fnmatch.fnmatchcase(h, pattern)}
    for group, members in groups.items():
        if fnmatch.fnmatchcase(group, pattern):
            matched |= set(members)
    return matched


LOCAL_INVENTORY = """\
# This machine, probed through a local subprocess: no SSH.
hosts:
  local: {transport: local}
"""


def local_inventory() -> Inventory:
    """What `fleet probe` without -i probes: the same as -i inventory/local.yaml. LOCAL_INVENTORY
    as its parse gives it, lines too (tests/unit/test_inventory.py holds the two equal): this
    machine's run imports no YAML parser before its host starts."""
    local = _located({"transport": "local"}, 3, {"transport": 3})
    document = _located({"hosts": _located({"local": local}, 3, {"local": 3})}, 2, {"hosts": 2})
    return inventory_from_document(document, Location("<built-in local inventory>", InventoryError))


def _located(values: dict[str, Any], line: int, key_lines: dict[str, int]) -> LocatedDict:
    mapping = LocatedDict(values)
    mapping.line, mapping.key_lines = line, key_lines
    return mapping
