"""Ansible hosts reached as Ansible's ssh connection would reach them (fleet/inventory/ansible.py):
the proxy in ansible_ssh_common_args / ansible_ssh_extra_args is honoured or the host refused,
naming file, group or host and variable (never dropped); ansible_python_interpreter in argv form
and Ansible's `auto*`; ansible_ssh_host over ansible_host as ansible-core resolves them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet.cli import main
from fleet.inventory.ansible import parse_ansible_export
from fleet.inventory.openssh import OpenSsh
from fleet.inventory.resolve import resolve_hosts
from fleet.models import Host
from tests.helpers import cli_runner, invoke_fleet

needs_ansible = pytest.mark.skipif(
    shutil.which("ansible-inventory") is None, reason="pip install ansible-core"
)


def export(hostvars: dict[str, dict[str, Any]], **groups: dict[str, Any]) -> dict[str, Any]:
    """An `ansible-inventory --list --export` document: every host ungrouped unless a group says."""
    grouped = {h for spec in groups.values() for h in spec.get("hosts", [])}
    return {
        "_meta": {"hostvars": hostvars},
        "all": {"children": ["ungrouped", *groups]},
        "ungrouped": {"hosts": [h for h in hostvars if h not in grouped]},
        **groups,
    }


def hosts_of(document: dict[str, Any], config: OpenSsh | None = None) -> dict[str, Host]:
    return dict(resolve_hosts(parse_ansible_export(document, "hosts.ini"), config).hosts)


# ---------------------------------------------------------------------------- item 2: proxies


def test_a_proxycommand_in_common_args_is_honoured_not_dropped() -> None:
    hosts = hosts_of(
        export(
            {"db": {"ansible_host": "10.0.0.7", "ansible_user": "ops"}, "web": {}},
            private={
                "hosts": ["db"],
                "vars": {
                    "ansible_ssh_common_args": '-o ProxyCommand="ssh -W %h:%p -q user@bastion"'
                },
            },
        )
    )
    db = hosts["db"]
    assert db.proxy_command == ("ssh", "-W", "10.0.0.7:22", "-q", "user@bastion")
    assert (
        db.origin("proxy_command") == "ansible hosts.ini: group private (ansible_ssh_common_args)"
    )
    assert hosts["web"].proxy_command is None


@pytest.mark.parametrize(
    ("args", "jump"),
    [
        ("-J ops@bastion:2222", "ops@bastion:2222"),
        ("-o ProxyJump=bastion", "bastion"),
        ("-oProxyJump=ssh://bastion", "bastion"),
        ("-o 'ProxyJump bastion' -o ProxyCommand='nc %h %p'", "bastion"),  # the first one wins
    ],
)
def test_a_jump_in_extra_args_becomes_fleets_jump(args: str, jump: str) -> None:
    host = hosts_of(export({"h": {"ansible_ssh_extra_args": args}}))["h"]
    assert (host.jump, host.proxy_command) == (jump, None)
    assert host.jump_host is not None


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ("-F ~/.ssh/other_config", "ssh -F ~/.ssh/other_config reads another ssh_config file"),
        ("-o BindAddress=10.0.0.2", "BindAddress 10.0.0.2: fleet does not choose the address"),
        ("-o SomeOption=yes", "ssh does not know 'someoption'"),
        ('-o ProxyCommand="nc %h %p | tee x"', "'|' is shell syntax"),
        ("-J a,b", "chains several jump hosts"),
        ("-o ProxyCommand='nc %h %p' -J b", "cannot be combined with ProxyCommand"),
        ("-W %h:%p", "forwards stdio"),
    ],
)
def test_what_fleet_cannot_honour_refuses_that_host_naming_file_group_and_variable(
    args: str, fragment: str
) -> None:
    hosts = hosts_of(
        export(
            {"bad": {}, "good": {}},
            edge={"hosts": ["bad"], "vars": {"ansible_ssh_common_args": args}},
        )
    )
    refused = hosts["bad"].refused
    assert refused is not None
    assert refused.startswith("hosts.ini: group edge: ansible_ssh_common_args: ")
    assert fragment in refused
    assert hosts["good"].refused is None


def test_options_that_change_nothing_fleet_does_are_left_out_quietly() -> None:
    args = (
        "-C -q -o StrictHostKeyChecking=no -o ControlMaster=auto -o ControlPersist=60s "
        "-o ServerAliveInterval=30 -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes"
    )
    host = hosts_of(export({"h": {"ansible_ssh_common_args": args}}))["h"]
    assert host.refused is None
    assert (host.known_hosts, host.identities_only) == ("/dev/null", True)


def test_ansible_port_and_user_come_before_the_args_as_in_ansibles_ssh_command_line() -> None:
    host = hosts_of(
        export(
            {
                "h": {
                    "ansible_port": 2200,
                    "ansible_ssh_common_args": "-p 2300 -l other -o User=third",
                    "ansible_ssh_extra_args": "-i ~/.ssh/extra",
                    "ansible_ssh_private_key_file": "/k/main",
                }
            }
        )
    )["h"]
    assert (host.port, host.user) == (2200, "other")
    assert host.identity_files == ("/k/main", str(Path.home() / ".ssh/extra"))
    assert host.origin("user") == "ansible hosts.ini: host h (ansible_ssh_common_args)"


def test_an_ansible_host_meets_ssh_config_under_the_name_ansible_gives_ssh(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ssh_config"
    path.write_text("Host 10.0.0.*\n    ProxyJump gw\n    User cfg\nHost db\n    Port 9\n")
    host = hosts_of(export({"db": {"ansible_host": "10.0.0.7"}}), OpenSsh((path,)))["db"]
    assert (host.jump, host.user, host.port) == ("gw", "cfg", 22)


# ---------------------------------------------------------------------------- item 4: variables


@pytest.mark.parametrize(
    ("value", "python", "origin_says"),
    [
        ("/usr/bin/env python", "python", "python on the host's PATH, as env finds it"),
        ("/usr/bin/env python3", "python3", "python3 on the host's PATH"),
        ("/opt/py/bin/python3.11", "/opt/py/bin/python3.11", "(ansible_python_interpreter)"),
        ("auto", "python3", "auto, fleet's own choice"),
        ("auto_silent", "python3", "auto_silent, fleet's own choice"),
        ("auto_legacy", "python3", "auto_legacy, fleet's own choice"),
        ("auto_legacy_silent", "python3", "auto_legacy_silent, fleet's own choice"),
    ],
)
def test_python_interpreter_forms(value: str, python: str, origin_says: str) -> None:
    host = hosts_of(export({"h": {"ansible_python_interpreter": value}}))["h"]
    assert host.refused is None
    assert host.python == python
    assert origin_says in host.origin("python")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("/usr/bin/python3 -E", "fleet starts the interpreter as one program, without arguments"),
        ("{{ ansible_playbook_python }}", "is a Jinja template"),
        ("/usr/bin/env -S python3 -u", "without arguments"),
    ],
)
def test_an_unusable_interpreter_refuses_that_host_not_the_inventory(
    value: str, fragment: str
) -> None:
    hosts = hosts_of(
        export({"odd": {"ansible_python_interpreter": value}, "fine": {"ansible_host": "10.1.1.1"}})
    )
    assert fragment in str(hosts["odd"].refused)
    assert "hosts.ini: host odd: ansible_python_interpreter" in str(hosts["odd"].refused)
    assert hosts["fine"].refused is None


def test_ansible_ssh_host_wins_over_ansible_host_wherever_each_is_set() -> None:
    hosts = hosts_of(
        export(
            {
                "both": {"ansible_host": "10.0.0.1", "ansible_ssh_host": "10.0.0.2"},
                "group-ssh-host": {"ansible_host": "10.0.0.3"},
                "legacy": {
                    "ansible_ssh_port": 2222,
                    "ansible_port": 22,
                    "ansible_ssh_user": "old",
                    "ansible_user": "new",
                },
            },
            legacy_group={"hosts": ["group-ssh-host"], "vars": {"ansible_ssh_host": "10.0.0.4"}},
        )
    )
    assert hosts["both"].address == "10.0.0.2"
    assert hosts["both"].origin("address") == "ansible hosts.ini: host both (ansible_ssh_host)"
    assert hosts["group-ssh-host"].address == "10.0.0.4"
    assert (hosts["legacy"].port, hosts["legacy"].user) == (2222, "old")


def test_ansible_core_itself_picks_the_ssh_variants() -> None:
    """What fleet follows, asked of ansible-core's own ssh connection plugin."""
    code = (
        "import io, json\n"
        "from ansible.plugins.loader import connection_loader\n"
        "from ansible.playbook.play_context import PlayContext\n"
        "c = connection_loader.get('ssh', PlayContext(), io.StringIO())\n"
        "c.set_options(var_options={'inventory_hostname': 'h', 'ansible_host': 'A',\n"
        "  'ansible_ssh_host': 'S', 'ansible_port': 1, 'ansible_ssh_port': 2, 'ansible_user': 'a',\n"
        "  'ansible_ssh_user': 's', 'ansible_private_key_file': '/a',\n"
        "  'ansible_ssh_private_key_file': '/s'})\n"
        "print(json.dumps([c.get_option(o) for o in\n"
        "  ('host', 'port', 'remote_user', 'private_key_file')]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0 and "No module named 'ansible'" in done.stderr:
        pytest.skip("ansible-core is not installed")
    assert json.loads(done.stdout) == ["S", 2, "s", "/s"]
    host = hosts_of(
        export(
            {
                "h": {
                    "ansible_host": "10.0.0.1",
                    "ansible_ssh_host": "10.0.0.2",
                    "ansible_port": 1,
                    "ansible_ssh_port": 2,
                    "ansible_user": "a",
                    "ansible_ssh_user": "s",
                    "ansible_private_key_file": "/a",
                    "ansible_ssh_private_key_file": "/s",
                }
            }
        )
    )["h"]
    assert (host.address, host.port, host.user, host.identity_file) == ("10.0.0.2", 2, "s", "/s")


# ------------------------------------------------------------------- the refusal, from the CLI


@needs_ansible
def test_a_refused_host_stops_a_probe_and_can_be_left_out(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[here]\nlocal1 ansible_connection=local ansible_python_interpreter="
        + sys.executable
        + "\n"
        "\n[far]\nbehind ansible_host=10.9.9.9\n\n[far:vars]\n"
        "ansible_ssh_common_args='-o ProxyCommand=\"ssh -W %h:%p gw | tee /tmp/x\"'\n"
    )
    refused = invoke_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "--no-save", "--ssh-config", "none"
    )
    assert refused.returncode == 2
    assert "fleet will not contact behind" in refused.stderr
    assert (
        f"behind: {inventory}: group far: ansible_ssh_common_args: ProxyCommand ssh -W %h:%p gw "
        "| tee /tmp/x: '|' is shell syntax"
    ) in refused.stderr
    assert "--limit '!behind'" in refused.stderr
    left_out = invoke_fleet(
        tmp_path,
        "probe",
        "-i",
        str(inventory),
        "-l",
        "!behind",
        "-p",
        "system",
        "--no-save",
        "--ssh-config",
        "none",
    )
    assert left_out.returncode == 0, left_out.stderr


# --------------------------------------------------------------------- item 5: fleet hosts --json


@needs_ansible
def test_hosts_json_is_one_document_of_what_fleet_resolved(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[gpu]\ngpu-01 ansible_host=10.0.0.1 ansible_user=ops\n"
        "gpu-02 ansible_host=10.0.0.2 ansible_python_interpreter='/usr/bin/env python3'\n"
        "bad ansible_ssh_common_args='-F other'\n"
        "\n[gpu:vars]\nansible_ssh_common_args='-o ProxyCommand=\"nc -X 5 -x proxy:1080 %h %p\"'\n"
        'fleet_probe_args={"gpu": {"expected_count": 8}}\n'
    )
    done = cli_runner().invoke(
        main, ["hosts", "--json", "-i", str(inventory), "--ssh-config", "none"]
    )
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["schema"] == "fleet.hosts/1"
    assert document["source"] == str(inventory)
    assert set(document["hosts"]) == {"gpu-01", "gpu-02", "bad"}
    first = document["hosts"]["gpu-01"]
    assert first["hostname"] == "10.0.0.1"
    assert (first["port"], first["user"], first["transport"]) == (22, "ops", "ssh")
    assert first["proxy_command"] == ["nc", "-X", "5", "-x", "proxy:1080", "10.0.0.1", "22"]
    assert first["groups"] == ["gpu"]
    assert first["probe_args"] == {"gpu": {"expected_count": 8}}
    assert first["refused"] is None
    assert first["origins"]["hostname"] == f"ansible {inventory}: host gpu-01 (ansible_host)"
    assert first["origins"]["port"] == "default"
    assert first["origins"]["proxy_command"].endswith("group gpu (ansible_ssh_common_args)")
    assert document["hosts"]["gpu-02"]["python"] == "python3"
    assert "ssh -F other reads another ssh_config file" in document["hosts"]["bad"]["refused"]
    assert any("fleet will not contact bad" in w for w in document["warnings"])
    assert set(first) >= {"jump", "jump_host", "identity_files", "identity_file", "known_hosts"}
