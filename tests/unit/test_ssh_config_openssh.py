"""~/.ssh/config read as OpenSSH 9 reads it (fleet/inventory/openssh/) and applied to
fleet's hosts (fleet/inventory/openssh/): end-of-line comments, first value wins, Host / Match
/ Include, ProxyJump against ProxyCommand, ProxyCommand as an argv, and what refuses a host.
The corpus test (tests/corpus) checks the same against the real `ssh -G`."""

from __future__ import annotations

import ast
import getpass
import re
from pathlib import Path

import pytest

from fleet.errors import InventoryError
from fleet.inventory import parse_inventory
from fleet.inventory.adhoc import AdhocSettings, adhoc_inventory
from fleet.inventory.openssh import OpenSsh
from fleet.inventory.openssh._lexer import argv_split
from fleet.inventory.openssh._proxy_command import ProxyCommandError, command_words
from fleet.inventory.resolve import refuse_hosts, resolve_hosts
from fleet.models import Host
from fleet.transport.ssh import ssh_command
from tests.conftest import ROOT
from tests.helpers import invoke_fleet


def resolved(
    tmp_path: Path, text: str, names: str, run_exec: bool = True, **given: object
) -> dict[str, Host]:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    inventory = adhoc_inventory(names, AdhocSettings(**given))  # type: ignore[arg-type]
    return dict(resolve_hosts(inventory, OpenSsh((path,), run_exec=run_exec)).hosts)


# ------------------------------------------------------------------------------- item 1: syntax


def test_end_of_line_comments_read_as_openssh_reads_them(tmp_path: Path) -> None:
    hosts = resolved(
        tmp_path,
        "Host pi  # Raspberry Pi\n"
        "    HostName 10.0.0.5  # rack 3\n"
        "    Port 2200 #compact\n"
        '    User "al ice"\n'
        "    IdentityFile ~/.ssh/id_#1  # a # inside a word is no comment\n",
        "pi",
    )
    host = hosts["pi"]
    assert (host.address, host.port, host.user) == ("10.0.0.5", 2200, "al ice")
    assert host.identity_files == (str(Path.home() / ".ssh/id_#1"),)
    assert host.origin("address").endswith("ssh_config:2")


def test_words_are_split_as_argv_split_does() -> None:
    assert argv_split("a \"b c\" 'd e' f\\ g # rest") == ["a", "b c", "d e", "f g"]
    assert argv_split('x\\"y "1#2"') == ['x"y', "1#2"]
    with pytest.raises(ValueError, match="invalid quotes"):
        argv_split('"open')


def test_a_default_ssh_config_with_comments_breaks_no_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *\n    ServerAliveInterval 30  # keep NAT open\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("hosts:\n  gpu-01: {address: 10.0.0.1}\n")
    done = invoke_fleet(tmp_path, "hosts", "-i", str(inventory), env={"HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert "gpu-01" in done.stdout


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("Host x\n    Port many\n", "ssh_config:2: Bad port 'many'"),
        ('Host x\n    HostName "10.0.0.1\n', "ssh_config:2: invalid quotes"),
        ("Host x\n    HostName a b\n", "ssh_config:2: keyword Hostname extra arguments"),
        ("Match foo bar\n", "ssh_config:1: Unsupported Match attribute foo"),
    ],
)
def test_a_line_ssh_rejects_is_an_error_naming_it(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(InventoryError) as caught:
        resolved(tmp_path, text, "x")
    assert fragment in caught.value.message


PACKAGE = ROOT / "fleet" / "inventory" / "openssh"
PARSER = ("_lexer", "_options", "_match", "_reader")


def _fleet_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return {m for m in modules if m and m.startswith("fleet")}


@pytest.mark.parametrize("name", PARSER)
def test_the_parser_does_not_import_the_module_that_applies_it(name: str) -> None:
    """_apply.py and _argv.py import the parser's modules, never the other way (no circle):
    the parser imports nothing of fleet but its own modules."""
    imported = _fleet_imports(PACKAGE / f"{name}.py")
    assert imported <= {f"fleet.inventory.openssh.{other}" for other in PARSER}


def test_the_rest_of_fleet_calls_the_package_only_through_its_entry_point() -> None:
    """One entry point: `OpenSsh`; the package's modules are private to it."""
    import fleet.inventory.openssh as package

    assert package.__all__ == ["OpenSsh"]
    for path in (ROOT / "fleet").rglob("*.py"):
        if PACKAGE not in path.parents:
            private = {m for m in _fleet_imports(path) if m.startswith(package.__name__ + ".")}
            assert not private, f"{path} imports {private}"


# ------------------------------------------------------------------------- matching, as ssh does


def test_first_value_wins_host_patterns_match_one_by_one(tmp_path: Path) -> None:
    hosts = resolved(
        tmp_path,
        "Host a,b\n    User comma\n"  # one pattern with a comma in it: matches neither
        "Host *.lab !bad.lab\n    User lab\n"
        "Host *\n    User everyone\n    Port 2222\nHost a\n    Port 1\n",
        "a,b,x.lab,bad.lab",
    )
    assert (hosts["a"].user, hosts["a"].port) == ("everyone", 2222)  # Host * came first
    assert hosts["x.lab"].user == "lab"
    assert hosts["bad.lab"].user == "everyone"


def test_match_criteria_and_the_final_pass(tmp_path: Path) -> None:
    text = (
        "Host jump\n    HostName jump.example.org\n"
        "Host finally\n    HostName finally.example.org\n    Port 1001\n"
        "Match originalhost web-*\n    HostName %h.internal\n"
        "Match host *.internal localuser " + getpass.getuser() + "\n    User ops\n"
        "Match final host *.example.org !host jump.example.org\n    ProxyJump jump\n"
    )
    hosts = resolved(tmp_path, text, "jump,finally,web-1")
    assert hosts["finally"].jump == "jump"
    assert hosts["finally"].port == 1001
    assert hosts["jump"].jump is None
    assert (hosts["web-1"].address, hosts["web-1"].user) == ("web-1.internal", "ops")


def test_include_reads_files_relative_to_dot_ssh_scoped_to_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh" / "config.d").mkdir(parents=True)
    (home / ".ssh" / "config.d" / "lab").write_text("Host lab1\n    HostName 10.1.0.1\n")
    monkeypatch.setenv("HOME", str(home))
    hosts = resolved(
        tmp_path,
        "Host lab1\n    Include config.d/*  nothing-*\n    User inner\n"
        "Host *\n    HostName fallback\n",
        "lab1,other",
    )
    assert (hosts["lab1"].address, hosts["lab1"].user) == ("10.1.0.1", "inner")
    assert hosts["other"].address == "fallback"


def test_match_exec_not_run_refuses_only_the_hosts_whose_settings_it_decides(
    tmp_path: Path,
) -> None:
    hosts = resolved(
        tmp_path,
        'Match host *.corp exec "vpn-is-up"\n    ProxyJump gw\n'
        'Match host *.lab exec "true"\n    SetEnv X=1\n',  # sets nothing fleet reads
        "a.corp,b.lab,home",
        run_exec=False,
    )
    refused = hosts["a.corp"].refused
    assert refused is not None
    assert "ssh_config:1: Match exec 'vpn-is-up' is not run: fleet runs no command" in refused
    assert "that block sets ProxyJump at" in refused
    assert hosts["b.lab"].refused is None
    assert hosts["home"].refused is None


# ------------------------------------------------------------------------- items 2 and 3: proxies


@pytest.mark.parametrize(
    ("lines", "jump", "command"),
    [
        ("ProxyJump j\n    ProxyCommand nc %h %p", "j", None),
        ("ProxyCommand nc %h %p\n    ProxyJump j", None, ("nc", "10.0.0.9", "22")),
        ("ProxyJump none\n    ProxyCommand nc %h %p", None, ("nc", "10.0.0.9", "22")),
        ("ProxyCommand none\n    ProxyJump j", None, None),
        ("ProxyJump ssh://u@j:2200", "u@j:2200", None),
    ],
)
def test_proxyjump_and_proxycommand_exclude_each_other_in_order(
    tmp_path: Path, lines: str, jump: str | None, command: tuple[str, ...] | None
) -> None:
    host = resolved(tmp_path, f"Host t\n    HostName 10.0.0.9\n    {lines}\n", "t")["t"]
    assert (host.jump, host.proxy_command) == (jump, command)


def test_proxycommand_is_an_argv_with_tokens_from_the_final_settings(tmp_path: Path) -> None:
    host = resolved(
        tmp_path,
        "Host gpu-*\n    HostName %h.Example.com\n"
        "    ProxyCommand exec ssh -W '[%h]:%p' -l %r -q 'bastion %%1' # via the bastion\n",
        "gpu-01",
        user="ops",
        port=2200,
    )["gpu-01"]
    assert host.proxy_command == (
        "ssh",
        "-W",
        "[gpu-01.example.com]:2200",
        "-l",
        "ops",
        "-q",
        "bastion %1",
    )
    assert host.origin("proxy_command").endswith("ssh_config:3")
    assert "-o 'ProxyCommand=ssh -W '\"'\"'[gpu-01.example.com]:2200" in ssh_command(host)


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("nc %h %p | tee log", "'|' is shell syntax"),
        ("ssh -W %h:%p $BASTION", "'$' asks the shell to expand"),
        ('ssh -W %h:%p "$(pick)"', "'$' inside double quotes"),
        ("PROXY=1 nc %h %p", "sets an environment variable"),
        ("nc %h %x", "%x is not a ProxyCommand token"),
        ("nc 'open", "a single quote is not closed"),
    ],
)
def test_a_proxycommand_that_needs_a_shell_is_refused(command: str, reason: str) -> None:
    with pytest.raises(ProxyCommandError, match=re.escape(reason)):
        command_words(command)


def test_quoted_words_comments_and_home_in_a_proxycommand() -> None:
    assert command_words("sh -c 'nc %h %p || nc backup %p'  # two routes") == (
        "sh",
        "-c",
        "nc %h %p || nc backup %p",
    )
    assert command_words("~/bin/proxy \"a b\" c\\ d '~/x'")[0] == str(Path.home() / "bin/proxy")
    assert command_words("~/bin/proxy \"a b\" c\\ d '~/x'")[1:] == ("a b", "c d", "~/x")


def test_a_refused_proxycommand_refuses_the_host_and_its_targets(tmp_path: Path) -> None:
    hosts = resolved(
        tmp_path,
        "Host bastion\n    ProxyCommand nc %h %p | cat\nHost inner\n    ProxyJump bastion\n",
        "bastion,inner,plain",
    )
    assert hosts["plain"].refused is None
    assert "ssh_config:2: ProxyCommand nc %h %p | cat: '|' is shell syntax" in str(
        hosts["inner"].refused
    )
    with pytest.raises(InventoryError) as caught:
        refuse_hosts(list(hosts.values()))
    assert caught.value.message.startswith("fleet will not contact bastion,inner")
    assert "--limit '!bastion'" in caught.value.hint


def test_the_inventory_proxy_comes_first_as_ssh_command_line_does(tmp_path: Path) -> None:
    path = tmp_path / "ssh_config"
    path.write_text("Host *\n    ProxyCommand nc %h %p\n")
    inventory = parse_inventory("hosts:\n  a: {jump: 'u@b:22'}\n  c: {jump: null}\n", "i.yaml")
    hosts = resolve_hosts(inventory, OpenSsh((path,))).hosts
    assert (hosts["a"].jump, hosts["a"].proxy_command) == ("u@b:22", None)
    assert hosts["c"].proxy_command == ("nc", "c", "22")  # `jump: null` is `ProxyJump none`


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "CanonicalizeHostname yes\nCanonicalDomains example.com\n",
            "ssh_config:1: CanonicalizeHostname yes: ssh would try the name",
        ),
        ("Host *\n    BindAddress 10.0.0.2\n", "ssh_config:2: BindAddress 10.0.0.2"),
        (
            "Host *\n    ProxyUseFdpass yes\n    ProxyCommand nc %h %p\n",
            "ssh_config:2: ProxyUseFdpass yes",
        ),
    ],
)
def test_what_changes_where_ssh_connects_refuses_the_host(
    tmp_path: Path, text: str, fragment: str
) -> None:
    host = resolved(tmp_path, text, "x")["x"]
    assert fragment in str(host.refused)


def test_canonicalization_without_domains_or_through_a_proxy_is_no_refusal(
    tmp_path: Path,
) -> None:
    hosts = resolved(
        tmp_path,
        "CanonicalizeHostname yes\nHost p\n    CanonicalDomains example.com\n    ProxyJump b\n",
        "p,q",
    )
    assert hosts["p"].refused is None  # proxied: ssh leaves the name to the proxy
    assert hosts["q"].refused is None  # no CanonicalDomains: nothing to try


def test_identity_files_expand_tokens_and_fleet_offers_the_first_that_exists(
    tmp_path: Path,
) -> None:
    key = tmp_path / "keys" / "ops@10.0.0.5"
    key.parent.mkdir()
    key.write_text("")
    host = resolved(
        tmp_path,
        f"Host a\n    HostName 10.0.0.5\n    User ops\n"
        f"    IdentityFile {tmp_path}/keys/missing\n    IdentityFile {tmp_path}/keys/%r@%h\n",
        "a",
    )["a"]
    assert host.identity_files == (f"{tmp_path}/keys/missing", str(key))
    assert host.identity_file == str(key)
    assert host.origin("identity_file").endswith("ssh_config:5")
