"""Parsing beside the real-sshd tests: ssh_config as OpenSSH reads it, ansible-inventory's JSON,
format sniffing, -H, --limit nodesets, missing identity files, fleet's ssh hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet import api
from fleet.cli import main
from fleet.errors import InventoryError, UsageError
from fleet.inventory import parse_inventory, select_names
from fleet.inventory.adhoc import AdhocSettings, adhoc_inventory
from fleet.inventory.ansible import parse_ansible_export
from fleet.inventory.openssh import OpenSsh
from fleet.inventory.resolve import resolve_hosts
from fleet.inventory.sources import sniff_text
from fleet.models import Host
from fleet.transport.ssh import ssh_command
from tests.helpers import cli_runner


def config_file(tmp_path: Path, text: str) -> OpenSsh:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return OpenSsh((path,))


CONFIG = """\
Host gpu-*
    User alice
    Port 2200
    StrictHostKeyChecking no

Host gpu-02
    Hostname 10.0.0.2
    ProxyJump jumper

Host jumper
    Hostname 10.9.9.9
    User bob
"""


def test_ssh_config_fills_defaults_and_names_each_line(tmp_path: Path) -> None:
    config = config_file(tmp_path, CONFIG)
    hosts = resolve_hosts(adhoc_inventory("gpu-[01-02]"), config).hosts
    first, second = hosts["gpu-01"], hosts["gpu-02"]
    assert first.target() == "alice@gpu-01:2200"
    assert first.origin("user") == f"ssh_config {tmp_path}/ssh_config:2"
    assert second.address == "10.0.0.2"
    assert second.origin("address").endswith("ssh_config:7")
    assert second.jump_host is not None
    assert second.jump_host.target() == "bob@10.9.9.9:22"
    assert config.warnings == [
        f"{tmp_path}/ssh_config:4: StrictHostKeyChecking no is ignored: fleet checks host keys "
        "strictly whatever this says (--accept-new records unknown keys, never changed ones)"
    ]


def test_inventory_and_cli_values_win_over_ssh_config(tmp_path: Path) -> None:
    config = config_file(tmp_path, CONFIG)
    inventory = parse_inventory("hosts:\n  gpu-02: {port: 22, jump: null}\n", "inv.yaml")
    host = resolve_hosts(inventory, config).hosts["gpu-02"]
    assert (host.port, host.jump, host.user) == (22, None, "alice")
    adhoc = adhoc_inventory("gpu-01", AdhocSettings(user="root", port=2))
    assert resolve_hosts(adhoc, config).hosts["gpu-01"].target() == "root@gpu-01:2"


def test_hosts_behind_one_proxyjump_share_one_bastion_object(tmp_path: Path) -> None:
    config = config_file(tmp_path, "Host n*\n    ProxyJump b\nHost b\n    Hostname 10.0.0.1\n")
    hosts = resolve_hosts(adhoc_inventory("n[1-3]"), config).hosts
    bastions = {id(h.jump_host) for h in hosts.values()}
    assert len(bastions) == 1


def test_bad_ssh_config_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as caught:
        resolve_hosts(adhoc_inventory("x"), config_file(tmp_path, "Host x\n    Port many\n"))
    assert "ssh_config:2: Bad port 'many'" in caught.value.message


def test_a_proxyjump_chain_refuses_that_host_only(tmp_path: Path) -> None:
    config = config_file(tmp_path, "Host x\n    ProxyJump a,b\n")
    hosts = resolve_hosts(adhoc_inventory("x,y"), config).hosts
    assert hosts["x"].refused is not None
    assert "ssh_config:2: ProxyJump a,b chains several jump hosts" in hosts["x"].refused
    assert hosts["y"].refused is None


def test_missing_ssh_config_given_by_name_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="does not exist"):
        api.select_hosts(hosts="x", ssh_config=str(tmp_path / "nope"))


EXPORT = {
    "_meta": {
        "hostvars": {
            "gpu-01": {"ansible_host": "10.0.0.1", "ansible_port": 2222},
            "gpu-03": {"ansible_user": "root", "fleet_python": "/opt/py/bin/python3"},
            "box": {"ansible_connection": "docker"},
        }
    },
    "all": {"children": ["ungrouped", "rack"], "vars": {"ansible_user": "ops"}},
    "rack": {"children": ["gpu"], "vars": {"ansible_port": 2200, "ansible_user": "rackop"}},
    "gpu": {
        "hosts": ["gpu-01", "gpu-03"],
        "vars": {
            "ansible_ssh_common_args": "-o UserKnownHostsFile=/k -J jump:2 -oPort=2300",
            "fleet_probe_args": '{"gpu": {"expected_count": 8}}',
        },
    },
    "ungrouped": {"hosts": ["box"]},
}


def test_ansible_vars_layer_all_parent_child_host() -> None:
    inventory = parse_ansible_export(EXPORT, "hosts.ini")
    first, third = inventory.hosts["gpu-01"], inventory.hosts["gpu-03"]
    assert first.target() == "rackop@10.0.0.1:2222"  # host var beats group vars
    # ansible_port (rack) becomes `-o Port=2200` ahead of ssh_common_args' -oPort=2300: ssh keeps
    # the first value it gets, as Ansible's ssh connection would
    assert third.target() == "root@gpu-03:2200"
    assert (third.known_hosts, third.jump, third.python) == ("/k", "jump:2", "/opt/py/bin/python3")
    assert third.probe_args == {"gpu": {"expected_count": 8}}
    assert third.origin("port") == "ansible hosts.ini: group rack (ansible_port)"
    assert third.origin("jump") == "ansible hosts.ini: group gpu (ansible_ssh_common_args)"
    assert inventory.groups["rack"] == ("gpu-01", "gpu-03")
    assert inventory.hosts["box"].transport == "unsupported:docker"


def test_ansible_errors_refuse_only_that_host_naming_it() -> None:
    bad = {"_meta": {"hostvars": {"gpu-03": {"ansible_port": 99999}, "ok": {}}}, "all": {}}
    hosts = parse_ansible_export(bad, "hosts.ini").hosts
    assert (
        hosts["gpu-03"].refused
        == "hosts.ini: host gpu-03: ansible_port: -o Port=99999: Bad port '99999'"
    )
    assert hosts["ok"].refused is None
    templated = {"_meta": {"hostvars": {"a": {"ansible_host": "{{ ip }}"}}}, "all": {}}
    refused = parse_ansible_export(templated, "hosts.ini").hosts["a"].refused
    assert refused is not None
    assert refused.startswith("hosts.ini: host a: ansible_host '{{ ip }}' is a Jinja template")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("hosts:\n  a: {}\n", "fleet"),
        ("defaults: {user: x}\nhosts:\n  a: {}\nextra: 1\n", "fleet"),
        ("# comment\n[gpu]\ngpu-01\n", "ansible"),
        ("gpu-01 ansible_host=10.0.0.1\n", "ansible"),
        ("all:\n  hosts:\n    a:\n", "ansible"),
        ("plugin: amazon.aws.aws_ec2\n", "ansible"),
        ("", "fleet"),
        ('{"hosts": {"a": {"transport": "local"}}}\n', "fleet"),  # fleet's, as one-line JSON
        ("{hosts: {a: {}}, groups: {}}\n", "fleet"),
        ('{"all": {"hosts": {"a": {}}}}\n', "ansible"),  # Ansible's JSON shape
    ],
)
def test_inventory_format_is_told_by_content(text: str, kind: str) -> None:
    assert sniff_text(text) == kind


def test_limit_takes_nodesets_and_globs() -> None:
    hosts = ["gpu-01", "gpu-02", "gpu-03", "login1"]
    assert select_names(hosts, {}, "gpu-[01,03],login1") == ["gpu-01", "gpu-03", "login1"]
    assert select_names(hosts, {}, "!gpu-[02-03]") == ["gpu-01", "login1"]
    assert select_names(hosts, {}, "gpu-0[12]") == ["gpu-01", "gpu-02"]


def test_adhoc_errors_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="-H"):
        adhoc_inventory("gpu-[01-")
    with pytest.raises(UsageError, match="--jump"):
        adhoc_inventory("a", AdhocSettings(jump="-oProxyCommand=x"))
    with pytest.raises(UsageError, match="two ways"):
        api.select_hosts("inv.yaml", hosts="a")
    with pytest.raises(UsageError, match="--user"):
        api.select_hosts(None, adhoc=AdhocSettings(user="x"))


def test_missing_identity_file_is_an_inventory_error_before_any_connection(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("defaults:\n  identity_file: /nope/key\nhosts:\n  a: {}\n  b: {}\n")
    done = cli_runner().invoke(main, ["probe", "-i", str(inventory), "--no-save"])
    assert done.exit_code == 2
    said = " ".join(done.stderr.split())  # wrapped at 80 columns, a path kept whole
    assert f"{inventory}:2: identity_file /nope/key does not exist (hosts a,b)" in said
    listed = cli_runner().invoke(main, ["hosts", "-i", str(inventory), "--ssh-config", "none"])
    assert listed.exit_code == 0
    assert "warning:" in listed.stderr


def test_hosts_lists_five_hosts_of_a_two_dimensional_nodeset() -> None:
    done = cli_runner().invoke(
        main,
        ["hosts", "-H", "rack[1-2]-gpu[01-02],login1", "--ssh-config", "none"],
        env={"COLUMNS": "200"},
    )
    assert done.exit_code == 0, done.output
    rows = [line for line in done.output.splitlines() if line.startswith("│")]
    names = [row.split("│")[1].strip() for row in rows]
    assert names == ["login1", "rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"]


def test_hint_reproduces_the_jump_identity_port_and_user() -> None:
    bastion = Host(name="b", address="10.0.0.1", port=2222, user="bob")
    host = Host(
        name="gpu-01",
        address="10.0.0.5",
        port=2200,
        user="ops",
        identity_file="/k/id",
        known_hosts="/k/known",
        jump="b",
        jump_host=bastion,
    )
    assert ssh_command(host) == (
        "ssh -p 2200 -i /k/id -o UserKnownHostsFile=/k/known -J bob@10.0.0.1:2222 ops@10.0.0.5 true"
    )
