"""`Match exec` as OpenSSH evaluates it (fleet/inventory/openssh/_exec.py, _match.py): the user's
own command line, %-tokens expanded as ssh does, run in the user's shell once per distinct
command line, its exit status deciding; `--no-ssh-exec` (or `ssh_exec: false`) refuses instead.
The real shell runs the commands; the corpus test compares the outcomes with real `ssh -G`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.inventory.adhoc import AdhocSettings, adhoc_inventory
from fleet.inventory.openssh import OpenSsh
from fleet.inventory.openssh._exec import MatchExec
from fleet.inventory.resolve import resolve_hosts
from fleet.models import Host
from tests.helpers import invoke_fleet

OFFICE = (
    "Host db1 db2\n    HostName 10.20.0.11\n"
    'Match host 10.20.* !exec "test -e {marker}"\n    ProxyJump gw\n'
)


def resolved(tmp_path: Path, text: str, names: str, run_exec: bool = True) -> dict[str, Host]:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    inventory = adhoc_inventory(names, AdhocSettings())
    return dict(resolve_hosts(inventory, OpenSsh((path,), run_exec=run_exec)).hosts)


def test_the_exit_status_decides_and_a_bang_negates(tmp_path: Path) -> None:
    marker = tmp_path / "office-net"
    away = resolved(tmp_path, OFFICE.format(marker=marker), "db1")["db1"]
    marker.touch()
    at_office = resolved(tmp_path, OFFICE.format(marker=marker), "db1")["db1"]
    assert (away.jump, away.refused) == ("gw", None)
    assert (at_office.jump, at_office.refused) == (None, None)


def test_tokens_are_expanded_as_ssh_does_and_each_command_line_runs_once(tmp_path: Path) -> None:
    log = tmp_path / "ran"
    hosts = resolved(
        tmp_path,
        "Host a\n    HostName 10.0.0.1\nHost b\n    HostName 10.0.0.2\nHost *\n    Port 2200\n"
        f'Match exec "echo %h %n %p >> {log}; test %n = a"\n    User matched\n'
        f'Match exec "echo %h %n %p >> {log}; test %n = a"\n    IdentitiesOnly yes\n',
        "a,b",
    )
    assert hosts["a"].user == "matched"
    assert (hosts["a"].identities_only, hosts["b"].user) == (True, None)
    # %h is the HostName, %n the name given, %p the port so far: one run per distinct command
    # line, although each host's two blocks ask the same
    assert sorted(log.read_text().splitlines()) == ["10.0.0.1 a 2200", "10.0.0.2 b 2200"]


def test_refusing_names_every_host_whose_settings_depend_on_it(tmp_path: Path) -> None:
    marker = tmp_path / "never-created"
    text = OFFICE.format(marker=marker) + "Host other\n    User x\n"
    hosts = resolved(tmp_path, text, "db1,db2,other", run_exec=False)
    for name in ("db1", "db2"):
        refused = hosts[name].refused
        assert refused is not None
        assert f"ssh_config:3: Match exec 'test -e {marker}' is not run" in refused
        assert "that block sets ProxyJump at" in refused
        assert hosts[name].jump is None  # never resolved as if the block were not there
    assert hosts["other"].refused is None


def test_a_command_killed_by_a_signal_refuses_the_host_as_ssh_stops_there(tmp_path: Path) -> None:
    hosts = resolved(tmp_path, 'Match exec "kill -9 $$"\n    SetEnv X=1\n', "a")
    assert "ssh_config:1: Match exec 'kill -9 $$' ended by signal 9" in (hosts["a"].refused or "")


def test_a_command_past_its_timeout_is_killed_and_refuses_the_hosts_that_reach_it() -> None:
    match_exec = MatchExec(timeout_s=0.2)
    assert match_exec("sleep 30", "cfg:4") == (
        "cfg:4: Match exec 'sleep 30' still ran after 0.2 s (killed):"
        " fleet cannot tell which route ssh would take"
    )


def test_the_users_shell_runs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shell = tmp_path / "myshell"
    shell.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\nexit 0\n')
    shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(shell))
    assert MatchExec()("false", "cfg:1") is True  # the shell said 0, whatever it was given
    assert (tmp_path / "args").read_text() == "-c false\n"
    monkeypatch.setenv("SHELL", str(tmp_path / "missing"))
    assert "is not executable" in str(MatchExec()("true", "cfg:1"))


def test_the_flag_and_the_inventory_setting_refuse_and_debug_says_what_ran(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text('Host a\n    HostName 10.20.0.1\nMatch exec "true"\n    User u\n')
    common = ("hosts", "-H", "a", "--ssh-config", str(config), "--json")
    refused = invoke_fleet(tmp_path, *common, "--no-ssh-exec")
    entry = json.loads(refused.stdout)["hosts"]["a"]
    assert f"{config}:3: Match exec 'true' is not run" in entry["refused"]
    ran = invoke_fleet(tmp_path, "--debug", *common)
    assert json.loads(ran.stdout)["hosts"]["a"]["user"] == "u"
    assert f"{config}:3: Match exec: running" in ran.stderr
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("ssh_exec: false\nhosts:\n  a: {}\n")
    by_file = invoke_fleet(
        tmp_path, "hosts", "-i", str(inventory), "--ssh-config", str(config), "--json"
    )
    assert "is not run" in json.loads(by_file.stdout)["hosts"]["a"]["refused"]


def test_ssh_exec_must_be_true_or_false(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("ssh_exec: maybe\nhosts:\n  a: {}\n")
    done = invoke_fleet(tmp_path, "hosts", "-i", str(inventory), "--ssh-config", "none")
    assert done.returncode != 0
    assert "inv.yaml:1: ssh_exec must be true or false, not 'maybe'" in done.stderr


def test_windows_style_identity_files_are_kept_as_ssh_keeps_them(tmp_path: Path) -> None:
    hosts = resolved(
        tmp_path,
        "Host w1\n    IdentityFile C:\\Users\\x\\key.pem\n"
        "Host w2\n    IdentityFile ~\\.ssh\\id_rsa\n",
        "w1,w2",
    )
    assert hosts["w1"].identity_files == ("C:\\Users\\x\\key.pem",)  # relative, backslashes kept
    assert "ssh_config:4: IdentityFile ~\\.ssh\\id_rsa: ssh cannot expand it" in (
        hosts["w2"].refused or ""
    )


def test_the_inventorys_user_and_port_are_seen_as_ssh_sees_l_and_p(tmp_path: Path) -> None:
    """ssh -l ops -p 2222 NAME: Match user and exec's %r / %p see them."""
    path = tmp_path / "ssh_config"
    path.write_text(
        'Match exec "test %r:%p = ops:2222"\n    IdentityFile /keys/by-exec\n'
        "Match user ops\n    ProxyJump gw\n"
    )
    inventory = adhoc_inventory("a,b", AdhocSettings(user="ops", port=2222))
    hosts = resolve_hosts(inventory, OpenSsh((path,))).hosts
    assert (hosts["a"].identity_files, hosts["a"].jump) == (("/keys/by-exec",), "gw")
    plain = resolve_hosts(adhoc_inventory("c", AdhocSettings()), OpenSsh((path,))).hosts["c"]
    assert (plain.identity_files, plain.jump) == ((), None)
