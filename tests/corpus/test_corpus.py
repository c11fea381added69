"""Real public ssh_config files and Ansible inventories (tests/corpus/*/NAME/, each with its SOURCE),
resolved by fleet and by the tools that own the formats: OpenSSH's `ssh -G` and Ansible's
`ansible-inventory --list`. For each ssh_config alias (a Host pattern without wildcards) and each
Ansible host, fleet must give the same hostname, port, user, jump / proxy command and identity
files (for Ansible also the groups and the interpreter), or refuse the host saying exactly what
it cannot honour (file:line or variable, and the keyword). A silent difference fails.

The expected values are computed here from the tools' own output, independently of fleet's code.
A corpus file's `Match exec` commands are `true`, `false` or `test …` (joined by &&): ssh -G runs
them, and so does fleet (once each), and both outcomes are compared.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fleet import api
from fleet.errors import FleetError
from fleet.inventory.ansible import load_ansible_inventory
from fleet.inventory.document import host_entry
from fleet.inventory.resolve import resolve_hosts

pytestmark = pytest.mark.slow

CORPUS = Path(__file__).resolve().parent
SSH_FILES = sorted((CORPUS / "ssh_config").glob("*/config"))
ANSIBLE_FILES = sorted(p for p in (CORPUS / "ansible").glob("*/inventory*") if p.is_file())
SSH = shutil.which("ssh")
ANSIBLE_INVENTORY = shutil.which("ansible-inventory")
# ssh -G's identity files when the config names none (OpenSSH 9.2, fill_default_options)
SSH_DEFAULT_KEYS = [
    "id_rsa",
    "id_ecdsa",
    "id_ecdsa_sk",
    "id_ed25519",
    "id_ed25519_sk",
    "id_xmss",
    "id_dsa",
]
MATCH_EXEC_RE = re.compile(r'^\s*match\b.*?\bexec\s+("[^"]*"|\S+)', re.IGNORECASE | re.MULTILINE)
SAFE_EXEC = ("true", "false", "test ")  # what a corpus file's Match exec may run
PLACE_RE = re.compile(r"[^ ]+:\d+: ")  # a refusal names file:line


@dataclass
class Tally:
    """What the comparison found, for the summary and the verdict."""

    files: int = 0
    compared: int = 0
    agreed: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)

    def summary(self, what: str) -> str:
        lines = [
            f"{what}: {self.files} files, {self.compared} hosts compared, {self.agreed} agreed, "
            f"{sum(self.refused.values())} refused, {len(self.wrong)} wrong"
        ]
        lines += [f"  refused ({n}): {reason}" for reason, n in self.refused.most_common()]
        lines += [f"  not compared ({n}): {reason}" for reason, n in self.skipped.most_common()]
        lines += [f"  WRONG: {line}" for line in self.wrong]
        return "\n".join(lines)


def test_corpus_is_large_enough_and_says_where_each_file_comes_from() -> None:
    assert len(SSH_FILES) >= 30
    assert len(ANSIBLE_FILES) >= 15
    for path in [*SSH_FILES, *ANSIBLE_FILES]:
        source = (path.parent / "SOURCE").read_text()
        for key in ("repo:", "path:", "commit:", "license:"):
            assert key in source, f"{path.parent}/SOURCE has no {key}"
        for command in MATCH_EXEC_RE.findall(path.read_text(errors="replace")):
            parts = command.strip('"').split("&&")
            assert all(p.strip().startswith(SAFE_EXEC) for p in parts), (path, command)


# ------------------------------------------------------------------------------------ ssh_config


def ssh_aliases(path: Path) -> list[str]:
    """Host patterns without wildcards or negation (the names a user types after `ssh`), and the
    names an ALIASES file beside the config adds (for its Match and wildcard blocks)."""
    names: list[str] = []
    for line in path.read_text(errors="replace").splitlines():
        words = line.split("#", 1)[0].replace("=", " ", 1).split()
        if len(words) > 1 and words[0].lower() == "host":
            names += [w.strip("\"'") for w in words[1:] if not set(w) & set("*?!,\"'")]
    extra = path.parent / "ALIASES"
    if extra.exists():
        lines = extra.read_text().splitlines()
        names += [n.strip() for n in lines if n.strip() and not n.startswith("#")]
    return list(dict.fromkeys(names))


def ssh_g(path: Path, alias: str) -> dict[str, list[str]] | None:
    """`ssh -G` for `alias` (unknown keywords ignored, as fleet does); None if ssh rejects it."""
    assert SSH
    done = subprocess.run(
        [SSH, "-G", "-F", str(path), "-o", "IgnoreUnknown=*", alias],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=20,
        check=False,
    )
    if done.returncode != 0:
        return None
    found: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        found.setdefault(key, []).append(value)
    return found


def expand_ssh_path(text: str, tokens: dict[str, str]) -> str:
    """What ssh does to an IdentityFile before it reads it: ~, ${VAR}, %-tokens."""
    text = os.path.expanduser(text)
    text = re.sub(r"\$\{([^}]*)\}", lambda m: os.environ.get(m[1], ""), text)
    return re.sub(r"%(.)", lambda m: tokens.get(m[1], "%" if m[1] == "%" else m[0]), text)


def jump_hops(text: str | None) -> list[tuple[str | None, str, int | None]]:
    hops = []
    for part in (text or "").split(","):
        if not part:
            continue
        user, _, hostport = part.rpartition("@") if "@" in part else (None, "", part)
        match = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(?::(\d+))?", hostport)
        assert match, part
        hops.append((user or None, match[1].strip("[]"), int(match[2]) if match[2] else None))
    return hops


def proxy_argv(command: str, tokens: dict[str, str]) -> list[str]:
    words = shlex.split(command, comments=True)
    while words and words[0] == "exec":
        words = words[1:]
    return [re.sub(r"%(.)", lambda m: tokens.get(m[1], m[1]), word) for word in words]


def compare_ssh(path: Path, alias: str, tally: Tally) -> None:
    try:
        selection = api.select_hosts(hosts=alias, ssh_config=str(path), require_files=False)
        fleet = host_entry(selection.hosts[0])
    except FleetError as exc:
        if ssh_g(path, alias) is None:
            tally.skipped["ssh and fleet both reject the file"] += 1
        elif "is not a valid host name" in exc.message or exc.message.startswith("-H "):
            tally.refused["a name fleet does not take as a host name"] += 1
        else:
            tally.wrong.append(
                f"{path.parent.name} {alias}: fleet fails, ssh reads it: {exc.message}"
            )
        return
    if fleet["refused"]:
        reason = fleet["refused"]
        if not PLACE_RE.search(reason):
            tally.wrong.append(f"{path.parent.name} {alias}: refusal names no file:line: {reason}")
        tally.refused[_refusal_kind(reason)] += 1
        return
    ssh = ssh_g(path, alias)
    if ssh is None:
        tally.skipped["ssh -G rejects the file (a keyword fleet does not read)"] += 1
        return
    tally.compared += 1
    errors = ssh_differences(alias, fleet, ssh)
    if errors:
        tally.wrong += [f"{path.parent.name} {alias}: {e}" for e in errors]
    else:
        tally.agreed += 1


def ssh_differences(alias: str, fleet: dict[str, Any], ssh: dict[str, list[str]]) -> list[str]:
    hostname, port, user = ssh["hostname"][0], int(ssh["port"][0]), ssh["user"][0]
    errors = []
    if fleet["hostname"].lower() != hostname.lower():
        errors.append(f"hostname {fleet['hostname']!r}, ssh {hostname!r}")
    if fleet["port"] != port:
        errors.append(f"port {fleet['port']}, ssh {port}")
    if (fleet["user"] or getpass.getuser()) != user:
        errors.append(f"user {fleet['user']!r}, ssh {user!r}")
    if jump_hops(fleet["jump"]) != jump_hops(ssh.get("proxyjump", [None])[0]):
        errors.append(f"jump {fleet['jump']!r}, ssh {ssh.get('proxyjump')}")
    tokens = {"h": hostname, "p": str(port), "r": user, "n": alias, "k": alias, "%": "%"}
    command = ssh.get("proxycommand", [None])[0]
    expected = proxy_argv(command, tokens) if command and command != "none" else None
    if fleet["proxy_command"] != expected:
        errors.append(f"proxy_command {fleet['proxy_command']}, ssh {command!r} → {expected}")
    keys = ssh.get("identityfile", [])
    if not fleet["identity_files"]:
        if keys != [f"~/.ssh/{k}" for k in SSH_DEFAULT_KEYS]:
            errors.append(f"no identity files, ssh {keys}")
    else:
        local = socket.gethostname()
        path_tokens = {
            **tokens,
            "u": getpass.getuser(),
            "d": os.path.expanduser("~"),
            "i": str(os.getuid()),
            "l": local,
            "L": local.split(".")[0],
            "C": hashlib.sha1(f"{local}{hostname}{port}{user}".encode()).hexdigest(),
        }
        expected_keys = [expand_ssh_path(k, path_tokens) for k in keys]
        if fleet["identity_files"] != expected_keys:
            errors.append(f"identity files {fleet['identity_files']}, ssh {expected_keys}")
    return errors


def _refusal_kind(reason: str) -> str:
    """A refusal's keyword and why, without places and values, to count refusals alike."""
    first = re.sub(r"^(jump host \S+: )?[^ ]+:\d+: ", "", reason.splitlines()[0])
    return f"{first.split(' ', 1)[0]}: {first.rsplit(': ', 1)[-1]}"[:120]


@pytest.mark.skipif(SSH is None, reason="needs OpenSSH's ssh client (ssh -G)")
def test_ssh_config_corpus_agrees_with_openssh(capsys: pytest.CaptureFixture[str]) -> None:
    tally = Tally(files=len(SSH_FILES))
    for path in SSH_FILES:
        for alias in ssh_aliases(path):
            compare_ssh(path, alias, tally)
    with capsys.disabled():
        print("\n" + tally.summary("ssh_config corpus vs ssh -G"))
    assert tally.compared >= 100
    assert not tally.wrong, tally.summary("ssh_config corpus vs ssh -G")


@pytest.mark.skipif(SSH is None, reason="needs OpenSSH's ssh client (ssh -G)")
@pytest.mark.parametrize(("name", "refused"), [("fleet-match-exec", 0), ("fleet-windows-paths", 1)])
def test_match_exec_and_windows_paths_are_resolved_as_ssh_does(name: str, refused: int) -> None:
    """Match exec is run (true and false, negated or not), not refused; of the Windows-style
    IdentityFiles only `~\\…` is refused (ssh stops at it: no such user)."""
    path = CORPUS / "ssh_config" / name / "config"
    tally = Tally(files=1)
    for alias in ssh_aliases(path):
        compare_ssh(path, alias, tally)
    assert not tally.wrong, tally.summary(name)
    assert sum(tally.refused.values()) == refused, tally.summary(name)
    assert tally.agreed == len(ssh_aliases(path)) - refused


# --------------------------------------------------------------------------------------- Ansible


ANSIBLE_ENV = {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true", "ANSIBLE_NOCOLOR": "1"}


def ansible_python() -> str:
    """The interpreter the ansible-inventory command runs under (its #! line)."""
    assert ANSIBLE_INVENTORY
    first = Path(ANSIBLE_INVENTORY).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!/") and "python" in first else sys.executable


def ansible_lists(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """`ansible-inventory -i FILE --list` of each file, from one process (ansible_list.py)."""
    done = subprocess.run(
        [ansible_python(), str(CORPUS / "ansible_list.py"), *map(str, paths)],
        capture_output=True,
        text=True,
        env=ANSIBLE_ENV,
        timeout=300,
        check=True,
    )
    documents: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return documents


def ansible_list(path: Path) -> dict[str, Any]:
    """The ansible-inventory command itself."""
    assert ANSIBLE_INVENTORY
    done = subprocess.run(
        [ANSIBLE_INVENTORY, "-i", str(path), "--list"],
        capture_output=True,
        text=True,
        env=ANSIBLE_ENV,
        timeout=120,
        check=True,
    )
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def ansible_groups(document: dict[str, Any]) -> dict[str, set[str]]:
    """host → every group it is in (through children too), `all` left out."""

    def members(group: str, seen: frozenset[str] = frozenset()) -> Iterator[str]:
        spec = document.get(group) or {}
        yield from spec.get("hosts") or []
        for child in spec.get("children") or []:
            if child not in seen:
                yield from members(child, seen | {group})

    found: dict[str, set[str]] = {}
    for group in document:
        if group in ("_meta", "all"):
            continue
        for host in members(group):
            found.setdefault(host, set()).add(group)
    return found


def ssh_arg_values(variables: dict[str, Any]) -> dict[str, Any]:
    """The first -o Key=value / -p / -l / -i / -J of the ssh command line Ansible builds."""
    words: list[str] = []
    for name in ("ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if variables.get(name):
            words += shlex.split(str(variables[name]))
    found: dict[str, Any] = {}
    index = 0
    while index < len(words):
        word = words[index]
        flag, value = word[:2], word[2:]
        if flag in ("-o", "-p", "-l", "-i", "-J") and not value and index + 1 < len(words):
            value = words[index + 1]
            index += 1
        index += 1
        if flag == "-o":
            match = re.match(r"\s*([^\s=]+)\s*=?\s*(.*)$", value, re.DOTALL)
            assert match, value
            key, setting = match[1].lower(), match[2]
            if key in ("proxyjump", "proxycommand") and ("proxy" in found):
                continue
            if key in ("proxyjump", "proxycommand"):
                found["proxy"] = (key, setting.strip())
            else:
                found.setdefault(key, setting.strip().strip('"'))
        elif flag == "-J" and "proxy" not in found:
            found["proxy"] = ("proxyjump", value)
        elif flag in ("-p", "-l", "-i"):
            found.setdefault({"-p": "port", "-l": "user", "-i": "identityfile"}[flag], value)
    return found


def expected_ansible(name: str, hostvars: dict[str, Any]) -> dict[str, Any]:
    """What Ansible's ssh connection would use for `name` (the later variable of each pair wins,
    and its own -o Port/User/IdentityFile come before the ssh_*_args)."""

    def last(*names: str) -> Any:
        return next((hostvars[n] for n in reversed(names) if hostvars.get(n) is not None), None)

    args = ssh_arg_values(hostvars)
    port = last("ansible_port", "ansible_ssh_port") or args.get("port")
    key = last("ansible_private_key_file", "ansible_ssh_private_key_file") or args.get(
        "identityfile"
    )
    python = hostvars.get("ansible_python_interpreter")
    if isinstance(python, str) and python in (
        "auto",
        "auto_silent",
        "auto_legacy",
        "auto_legacy_silent",
    ):
        python = None
    elif (
        isinstance(python, str)
        and python.split()[0] in ("/usr/bin/env", "env")
        and len(python.split()) == 2
    ):
        python = python.split()[1]
    proxy = args.get("proxy")
    return {
        "hostname": str(last("ansible_host", "ansible_ssh_host") or name),
        "port": int(port) if port else 22,
        "user": last("ansible_user", "ansible_ssh_user") or args.get("user"),
        "identity_file": os.path.expanduser(str(key)) if key else None,
        "python": python or "python3",
        "proxy": proxy,
    }


def compare_ansible(path: Path, document: dict[str, Any], fleet_hosts: Any, tally: Tally) -> None:
    hostvars = document.get("_meta", {}).get("hostvars", {})
    groups = ansible_groups(document)
    names = set(hostvars) | set(groups)
    if set(fleet_hosts) != names:
        tally.wrong.append(
            f"{path.parent.name}: hosts {sorted(fleet_hosts)}, ansible {sorted(names)}"
        )
    for name in sorted(names & set(fleet_hosts)):
        host = fleet_hosts[name]
        if set(host.groups) != groups.get(name, set()) - {"all"}:
            tally.wrong.append(
                f"{path.parent.name} {name}: groups {host.groups}, ansible {groups.get(name)}"
            )
        variables = hostvars.get(name, {})
        if host.refused:
            if path.name not in host.refused or not re.search(
                r"ansible_\w+|fleet_\w+", host.refused
            ):
                tally.wrong.append(
                    f"{path.parent.name} {name}: refusal names no file/variable: {host.refused}"
                )
            tally.refused[_ansible_refusal_kind(host.refused)] += 1
            continue
        connection = str(variables.get("ansible_connection", "ssh"))
        if connection not in ("ssh", "smart", "paramiko", "ansible.builtin.ssh"):
            tally.skipped[f"ansible_connection {connection}"] += 1
            continue
        tally.compared += 1
        errors = ansible_differences(name, host_entry(host), expected_ansible(name, variables))
        if errors:
            tally.wrong += [f"{path.parent.name} {name}: {e}" for e in errors]
        else:
            tally.agreed += 1


def ansible_differences(name: str, fleet: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    errors = [
        f"{key} {fleet[key]!r}, ansible {expected[key]!r}"
        for key in ("hostname", "port", "user", "identity_file", "python")
        if fleet[key] != expected[key] and not (key == "port" and fleet[key] == int(expected[key]))
    ]
    proxy = expected["proxy"]
    if proxy is None and (fleet["jump"] or fleet["proxy_command"]):
        errors.append(f"proxy {fleet['jump'] or fleet['proxy_command']}, ansible none")
    elif proxy and proxy[0] == "proxyjump" and jump_hops(fleet["jump"]) != jump_hops(proxy[1]):
        errors.append(f"jump {fleet['jump']!r}, ansible {proxy[1]!r}")
    elif proxy and proxy[0] == "proxycommand":
        tokens = {
            "h": expected["hostname"].lower(),
            "p": str(expected["port"]),
            "r": expected["user"] or getpass.getuser(),
            "n": expected["hostname"],
            "k": expected["hostname"],
            "%": "%",
        }
        if fleet["proxy_command"] != proxy_argv(proxy[1], tokens):
            errors.append(f"proxy_command {fleet['proxy_command']}, ansible {proxy[1]!r}")
    return errors


def _ansible_refusal_kind(reason: str) -> str:
    first = reason.splitlines()[0]
    variable = re.search(r"(ansible_\w+|fleet_\w+)", first)
    return f"{variable[1] if variable else '?'}: {first.rsplit(': ', 1)[-1]}"[:120]


@pytest.mark.skipif(ANSIBLE_INVENTORY is None, reason="pip install ansible-core")
def test_ansible_corpus_agrees_with_ansible_inventory(capsys: pytest.CaptureFixture[str]) -> None:
    tally = Tally(files=len(ANSIBLE_FILES))
    documents = ansible_lists(ANSIBLE_FILES)
    assert documents[str(ANSIBLE_FILES[0])] == ansible_list(ANSIBLE_FILES[0]), "ansible_list.py"

    def resolved(path: Path) -> Any:
        try:  # as `fleet hosts --json -i FILE --ssh-config none` resolves them
            return resolve_hosts(load_ansible_inventory(str(path)), None).hosts
        except FleetError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=4) as pool:  # ansible-inventory mostly starts up
        results = list(zip(ANSIBLE_FILES, pool.map(resolved, ANSIBLE_FILES)))
    for path, fleet_hosts in results:
        if isinstance(fleet_hosts, FleetError):
            tally.wrong.append(f"{path.parent.name}: fleet fails: {fleet_hosts.message}")
            continue
        compare_ansible(path, documents[str(path)], fleet_hosts, tally)
    with capsys.disabled():
        print("\n" + tally.summary("Ansible corpus vs ansible-inventory --list"))
    assert tally.compared >= 50
    assert not tally.wrong, tally.summary("Ansible corpus vs ansible-inventory --list")
