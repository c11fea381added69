"""Hosts where they already are, against real sshd on loopback: -H nodesets through ~/.ssh/config
aliases (one shared ProxyJump connection), and Ansible inventories through the real
ansible-inventory. Host keys stay strict in every case."""

from __future__ import annotations

import getpass
import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import FAKES
from tests.integration.conftest import FleetResult, closed_port, divergence_block, run_fleet
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration

STUB_OLD_TORCH = FAKES / "stubs" / "torch_sm120_noarch"
NODES = ["node-1", "node-2", "node-3", "node-4"]
# Their sshd in the session's farm (other modules start their own node-N there).
IN_FARM = {**{n: f"sshcfg-{n}" for n in NODES}, "alias-bastion": "alias-bastion"}


def alias(name: str, farm: SshdFarm, **extra: str) -> str:
    host = farm.hosts[IN_FARM[name]]
    lines = [f"Host {name}", f"    Hostname {host.address}", f"    Port {host.port}"]
    lines += [f"    {key} {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def common_block(farm: SshdFarm, known_hosts: Path, patterns: str) -> str:
    return (
        f"Host {patterns}\n"
        f"    User {getpass.getuser()}\n"
        f"    IdentityFile {farm.root / 'nowhere_key'}\n"  # missing: skipped, as ssh does
        f"    IdentityFile {farm.client_key}\n"
        "    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {known_hosts}\n"
        "    ConnectTimeout 5\n"
    )


@pytest.fixture(scope="module")
def aliased(farm: SshdFarm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node-1…4 as ssh_config aliases; node-3 has an older torch; node-3 and node-4 sit behind
    the bastion (ProxyJump)."""
    folder = tmp_path_factory.mktemp("aliased")
    farm.start("alias-bastion", "127.0.61.1", LogLevel="DEBUG1")
    for index, name in enumerate(NODES):
        env = {"PYTHONPATH": str(STUB_OLD_TORCH)} if name == "node-3" else {}
        farm.start(IN_FARM[name], f"127.0.61.{index + 2}", env)
    known = farm.known_hosts(
        folder / "known_hosts", [IN_FARM[n] for n in ["alias-bastion", *NODES]]
    )
    config = "".join(alias(n, farm) for n in ("node-1", "node-2"))
    config += "".join(alias(n, farm, ProxyJump="alias-bastion") for n in ("node-3", "node-4"))
    config += alias("alias-bastion", farm)
    config += common_block(farm, known, "node-* alias-bastion")
    (folder / "ssh_config").write_text(config)
    return folder


def probe_aliases(tmp_path: Path, config: Path, *extra: str) -> FleetResult:
    return run_fleet(
        tmp_path,
        "probe",
        "-H",
        "node-[1-4]",
        "--ssh-config",
        str(config),
        "--python",
        sys.executable,
        "-p",
        "system,packages",
        *extra,
    )


def test_nodeset_probes_four_ssh_config_aliases_one_bastion_connection(
    farm: SshdFarm, aliased: Path, tmp_path: Path
) -> None:
    bastion_log = farm.hosts["alias-bastion"].log
    assert bastion_log is not None
    before = bastion_log.read_text().count("Accepted publickey")

    result = probe_aliases(tmp_path, aliased / "ssh_config")

    assert result.returncode == 0, result.stdout + result.stderr
    assert {result.status(n) for n in NODES} == {"ok"}
    assert result.host("node-4")["address"] == farm.hosts[IN_FARM["node-4"]].address
    block = divergence_block(result.full_diff(), "packages.packages.torch")
    assert "node-3" in block
    assert "node-1" not in block
    log = bastion_log.read_text()
    assert log.count("Accepted publickey") - before == 1, "node-3 and node-4 share one connection"
    assert log.count("direct-tcpip") >= 2


def test_unknown_key_through_ssh_config_is_still_refused(
    farm: SshdFarm, aliased: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    config = (aliased / "ssh_config").read_text().replace(str(aliased / "known_hosts"), str(empty))
    lenient = tmp_path / "ssh_config"
    lenient.write_text("Host *\n    StrictHostKeyChecking no\n" + config)

    result = probe_aliases(tmp_path, lenient)

    assert result.returncode == 4
    assert result.status("node-1") == "hostkey_unknown"
    assert f"{lenient}:2: StrictHostKeyChecking no is ignored" in result.stderr
    assert not (result.state_dir / "fleet" / "known_hosts").exists()


def test_accept_new_says_which_keys_it_recorded_and_where(
    farm: SshdFarm, aliased: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    config = tmp_path / "ssh_config"
    config.write_text(
        (aliased / "ssh_config").read_text().replace(str(aliased / "known_hosts"), str(empty))
    )

    result = probe_aliases(tmp_path, config, "-l", "node-[1-2]", "--accept-new")

    assert result.status("node-1") == result.status("node-2") == "ok"
    recorded = result.state_dir / "fleet" / "known_hosts"
    for name in ("node-1", "node-2"):
        host = farm.hosts[IN_FARM[name]]
        line = next(x for x in result.stderr.splitlines() if f"host key of {name} " in x)
        assert f"[{host.address}]:{host.port}" in line
        assert "SHA256:" in line
        assert str(recorded) in line


def test_hint_behind_a_jump_host_reproduces_fleets_path(
    farm: SshdFarm, aliased: Path, tmp_path: Path
) -> None:
    port = closed_port()
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host node-dead\n    Hostname 127.0.0.1\n    Port {port}\n    ProxyJump alias-bastion\n"
        + (aliased / "ssh_config").read_text().replace("node-* alias-bastion", "node-* alias-*")
    )
    result = run_fleet(
        tmp_path, "probe", "-H", "node-dead", "--ssh-config", str(config), "-p", "system"
    )
    assert result.status("node-dead") == "unreachable"
    hint = result.host("node-dead")["hint"]
    bastion = farm.hosts["alias-bastion"]
    assert f"-J {getpass.getuser()}@{bastion.address}:{bastion.port}" in hint
    assert f"-i {farm.client_key}" in hint
    assert f"-p {port}" in hint
    assert f"{getpass.getuser()}@127.0.0.1 true" in hint


# ------------------------------------------------------------------------------------- Ansible

needs_ansible = pytest.mark.skipif(
    shutil.which("ansible-inventory") is None, reason="pip install ansible-core"
)


@pytest.fixture(scope="module")
def ansible_hosts(farm: SshdFarm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ansible")
    farm.start("ans-bastion", "127.0.62.1", LogLevel="DEBUG1")
    for index, name in enumerate(["ans-1", "ans-2", "ans-3", "ans-login"]):
        env = {"PYTHONPATH": str(STUB_OLD_TORCH)} if name == "ans-2" else {}
        farm.start(name, f"127.0.62.{index + 2}", env)
    farm.known_hosts(
        folder / "known_hosts", ["ans-bastion", "ans-1", "ans-2", "ans-3", "ans-login"]
    )
    return folder


def ansible_line(farm: SshdFarm, name: str) -> str:
    host = farm.hosts[name]
    return f"{name} ansible_host={host.address} ansible_port={host.port}"


@needs_ansible
def test_ansible_ini_group_with_known_hosts_from_ssh_common_args(
    farm: SshdFarm, ansible_hosts: Path, tmp_path: Path
) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[gpu]\n"
        + "".join(ansible_line(farm, n) + "\n" for n in ("ans-1", "ans-2"))
        + "ans-box ansible_connection=community.docker.docker\n"
        + "\n[login]\n"
        + ansible_line(farm, "ans-login")
        + "\n\n[gpu:vars]\n"
        f"ansible_user={getpass.getuser()}\n"
        f"ansible_ssh_private_key_file={farm.client_key}\n"
        f"ansible_python_interpreter={sys.executable}\n"
        f"ansible_ssh_common_args='-o UserKnownHostsFile={ansible_hosts / 'known_hosts'}'\n"
        'fleet_probe_args={"packages": {}}\n'
    )

    result = run_fleet(
        tmp_path,
        "probe",
        "-i",
        str(inventory),
        "--limit",
        "gpu",
        "-p",
        "system,packages",
        "--ssh-config",
        "none",
    )

    assert set(result.document["hosts"]) == {"ans-1", "ans-2", "ans-box"}
    assert result.status("ans-1") == result.status("ans-2") == "ok", result.stdout
    assert result.status("ans-box") == "unreachable"
    assert "'community.docker.docker' is not one fleet speaks" in result.host("ans-box")["error"]
    assert "ans-2" in divergence_block(result.full_diff(), "packages.packages.torch")
    assert result.returncode == 4


@needs_ansible
def test_ansible_yaml_children_group_vars_and_jump_in_ssh_args(
    farm: SshdFarm, ansible_hosts: Path, tmp_path: Path
) -> None:
    bastion, target = farm.hosts["ans-bastion"], farm.hosts["ans-3"]
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        f"""\
all:
  vars:
    ansible_user: {getpass.getuser()}
    ansible_ssh_private_key_file: {farm.client_key}
    ansible_python_interpreter: {sys.executable}
    ansible_ssh_common_args: -o UserKnownHostsFile={ansible_hosts / "known_hosts"}
  children:
    edge:
      hosts:
        ans-bastion: {{ansible_host: {bastion.address}, ansible_port: {bastion.port}}}
    cluster:
      children:
        inner:
          hosts:
            ans-3: {{ansible_host: {target.address}}}
          vars:
            ansible_port: {target.port}
            ansible_ssh_extra_args: -J ans-bastion
"""
    )
    listed = run_fleet(tmp_path, "hosts", "-i", str(inventory), "--ssh-config", "none")
    assert "group inner" in listed.stdout, listed.stderr

    result = run_fleet(
        tmp_path,
        "probe",
        "-i",
        str(inventory),
        "-l",
        "cluster",
        "-p",
        "system",
        "--ssh-config",
        "none",
    )

    assert list(result.document["hosts"]) == ["ans-3"]
    assert result.status("ans-3") == "ok", result.stdout + result.stderr
    assert bastion.log is not None
    assert "direct-tcpip" in bastion.log.read_text()


# ------------------------------------------------------------------------------ ProxyCommand

RELAY = """\
import os, socket, sys, threading
host, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(log, "a") as handle:
    handle.write(f"{host}:{port}\\n")
sock = socket.create_connection((host, port))
def upstream():
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
threading.Thread(target=upstream, daemon=True).start()
while True:
    data = sock.recv(65536)
    if not data:
        break
    os.write(1, data)
"""


def ssh_w_command(farm: SshdFarm, known_hosts: Path) -> str:
    """OpenSSH's own client as the proxy: `ssh -W %h:%p` through the bastion."""
    bastion = farm.hosts["alias-bastion"]
    return (
        f"ssh -F none -i {farm.client_key} -o IdentitiesOnly=yes -o BatchMode=yes "
        f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes "
        f"-p {bastion.port} -W %h:%p {getpass.getuser()}@{bastion.address}"
    )


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh client")
def test_proxycommand_reaches_hosts_through_a_relay_and_through_ssh_w(
    farm: SshdFarm, aliased: Path, tmp_path: Path
) -> None:
    relay, relay_log = tmp_path / "relay.py", tmp_path / "relay.log"
    relay.write_text(RELAY)
    known = aliased / "known_hosts"
    config = tmp_path / "ssh_config"
    config.write_text(
        alias("node-1", farm, ProxyCommand=f"{sys.executable} {relay} %h %p {relay_log}")
        + alias("node-2", farm, ProxyCommand=ssh_w_command(farm, known) + "  # via the bastion")
        + common_block(farm, known, "node-* alias-bastion")
    )
    bastion_log = farm.hosts["alias-bastion"].log
    assert bastion_log is not None
    before = bastion_log.read_text().count("direct-tcpip")

    listed = run_fleet(tmp_path, "hosts", "--json", "-H", "node-[1-2]", "--ssh-config", str(config))
    node_1 = farm.hosts[IN_FARM["node-1"]]
    document = json.loads(listed.stdout)
    assert document["hosts"]["node-1"]["proxy_command"][-3:] == [
        node_1.address,
        str(node_1.port),
        str(relay_log),
    ]
    result = run_fleet(
        tmp_path,
        "probe",
        "-H",
        "node-[1-2]",
        "--ssh-config",
        str(config),
        "--python",
        sys.executable,
        "-p",
        "system",
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert {result.status("node-1"), result.status("node-2")} == {"ok"}
    assert relay_log.read_text() == f"{node_1.address}:{node_1.port}\n"
    assert bastion_log.read_text().count("direct-tcpip") > before


@needs_ansible
@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh client")
def test_ansible_proxycommand_is_honoured_and_a_shell_one_refused_before_contact(
    farm: SshdFarm, ansible_hosts: Path, tmp_path: Path
) -> None:
    bastion, target = farm.hosts["ans-bastion"], farm.hosts["ans-1"]
    known = ansible_hosts / "known_hosts"
    proxy = (
        f"ssh -F none -i {farm.client_key} -o IdentitiesOnly=yes -o BatchMode=yes "
        f"-o UserKnownHostsFile={known} -p {bastion.port} -W %h:%p "
        f"{getpass.getuser()}@{bastion.address}"
    )
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        f"[inner]\nans-1 ansible_host={target.address} ansible_port={target.port}\n\n"
        "[inner:vars]\n"
        f"ansible_user={getpass.getuser()}\n"
        f"ansible_ssh_private_key_file={farm.client_key}\n"
        "ansible_python_interpreter=/usr/bin/env python3\n"  # argv form: python3 on the PATH
        f"ansible_ssh_common_args='-o UserKnownHostsFile={known} -o ProxyCommand=\"{proxy}\"'\n"
    )
    assert bastion.log is not None
    assert target.log is not None
    before = bastion.log.read_text().count("direct-tcpip")

    result = run_fleet(
        tmp_path,
        "probe",
        "-i",
        str(inventory),
        "-p",
        "system",
        "--ssh-config",
        "none",
    )
    assert result.status("ans-1") == "ok", result.stdout + result.stderr
    assert bastion.log.read_text().count("direct-tcpip") > before

    contacts = target.log.read_text().count("Connection from")
    inventory.write_text(
        inventory.read_text().replace(f'{proxy}"', f'{proxy} | tee /tmp/proxy.log"')
    )
    refused = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "--ssh-config", "none"
    )
    assert refused.returncode == 2
    assert f"ans-1: {inventory}: group inner: ansible_ssh_common_args: ProxyCommand" in (
        refused.stderr
    )
    assert "'|' is shell syntax" in refused.stderr
    assert target.log.read_text().count("Connection from") == contacts
