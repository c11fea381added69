"""Inventory parsing: precedence, hostlists, --limit, and errors that name file:line and value."""

from __future__ import annotations

import os
import textwrap

import pytest
import yaml

from fleet import yamlfile
from fleet.errors import InventoryError, UsageError
from fleet.hostsets import compact_hosts
from fleet.inventory import expand_hostlist, parse_inventory, select_names

EXAMPLE = textwrap.dedent("""\
    defaults:
      user: ubuntu
      port: 22
      identity_file: ~/.ssh/id_ed25519
      known_hosts: ~/.ssh/known_hosts
      python: python3
      jump: bastion
      connect_timeout: 10
    hosts:
      bastion: {address: 10.0.0.1, jump: null}
      gpu-[01-08]: {}
      h200-a: {address: 10.0.0.5, port: 2222, python: /opt/venv/bin/python}
      local: {transport: local}
    groups:
      blackwell: {hosts: ["gpu-[01-08]"], vars: {user: ops}}
    """)


def parse(text: str):
    return parse_inventory(textwrap.dedent(text), "inv.yaml")


def test_issue_example_resolves_with_precedence() -> None:
    inventory = parse_inventory(EXAMPLE, "inv.yaml")
    assert list(inventory.hosts)[:3] == ["bastion", "gpu-01", "gpu-02"]
    gpu = inventory.hosts["gpu-05"]
    assert (gpu.user, gpu.port, gpu.address, gpu.jump) == ("ops", 22, "gpu-05", "bastion")
    assert gpu.identity_file == os.path.expanduser("~/.ssh/id_ed25519")
    assert gpu.jump_host is not None
    assert gpu.jump_host.address == "10.0.0.1"
    h200 = inventory.hosts["h200-a"]
    assert (h200.user, h200.port, h200.python) == ("ubuntu", 2222, "/opt/venv/bin/python")
    assert inventory.hosts["bastion"].jump is None
    assert inventory.hosts["local"].transport == "local"
    assert inventory.groups["blackwell"] == tuple(f"gpu-0{i}" for i in range(1, 9))


def test_probe_args_merge_per_probe_with_host_winning() -> None:
    inventory = parse("""\
        defaults: {probe_args: {allreduce: {quick: true, backend: nccl}}}
        hosts:
          a: {probe_args: {allreduce: {backend: gloo}}}
          b: {}
        """)
    assert inventory.hosts["a"].probe_args["allreduce"] == {"quick": True, "backend": "gloo"}
    assert inventory.hosts["b"].probe_args["allreduce"] == {"quick": True, "backend": "nccl"}


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("hosts:\n  a: {port: 70000}\n", 2, "port 70000 is outside 1–65535"),
        ("hosts:\n  a: {port: 0}\n", 2, "port 0"),
        ("hosts:\n  'gpu-07;rm': {}\n", 2, "'gpu-07;rm' is not a valid host name"),
        ("hosts:\n  a: {user: 'bob smith'}\n", 2, "user 'bob smith'"),
        ("hosts:\n  a: {address: '-oProxyCommand=x'}\n", 2, "'-oProxyCommand=x'"),
        ('hosts:\n  a: {address: "x\\ty"}\n', 2, "address"),
        ("hosts:\n  a: {python: 'python3; rm -rf /'}\n", 2, "python"),
        ("hosts:\n  a: {colour: red}\n", 2, "unknown key 'colour'"),
        ("hosts:\n  a: {}\n  a: {}\n", 3, "duplicate key 'a'"),
        ("hosts:\n  a: {jump: nowhere}\n", 2, "jump host 'nowhere'"),
        ("hosts:\n  a: {transport: telnet}\n", 2, "transport 'telnet'"),
        ("hosts:\n  a: [1, 2\n", 3, "not valid YAML"),
        ("hosts:\n  a: {}\ngroups:\n  g: {hosts: [b]}\n", 4, "lists host 'b'"),
        ("hosts:\n  gpu-[05-01]: {}\n", 2, "runs backwards"),
        ("hosts:\n  a: {}\nextra: 1\n", 3, "unknown key 'extra'"),
        ("defaults: {port: true}\nhosts:\n  a: {}\n", 1, "port True"),
    ],
)
@pytest.mark.parametrize("parser", ["libyaml", "pure-python"])
def test_bad_inventories_name_file_line_and_value(
    text: str, line: int, fragment: str, parser: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if parser == "pure-python":  # PyYAML without libyaml: same lines, same messages
        monkeypatch.setattr(yamlfile, "_base_loader", lambda: yaml.SafeLoader)
    elif not yaml.__with_libyaml__:
        pytest.skip("this PyYAML has no libyaml")
    with pytest.raises(InventoryError) as caught:
        parse_inventory(text, "inv.yaml")
    assert caught.value.message.startswith(f"inv.yaml:{line}:"), caught.value.message
    assert fragment in caught.value.message


def test_empty_inventory_is_an_error() -> None:
    with pytest.raises(InventoryError, match="empty"):
        parse_inventory("", "inv.yaml")


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("gpu-[01-03]", ["gpu-01", "gpu-02", "gpu-03"]),
        ("node[1,3,5-6]", ["node1", "node3", "node5", "node6"]),
        ("r[1-2]g[1-2]", ["r1g1", "r1g2", "r2g1", "r2g2"]),
        ("plain", ["plain"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
    ],
)
def test_hostlist_expansion(pattern: str, expected: list[str]) -> None:
    assert expand_hostlist(pattern) == expected


@pytest.mark.parametrize("pattern", ["gpu-[01-", "gpu-[a-b]", "gpu-[1-2"])
def test_bad_hostlists_are_rejected(pattern: str) -> None:
    with pytest.raises(InventoryError):
        expand_hostlist(pattern)


HOSTS = ["gpu-01", "gpu-02", "gpu-03", "h200-a", "local"]
GROUPS = {"blackwell": ("gpu-01", "gpu-02", "gpu-03")}


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (None, HOSTS),
        ("blackwell", ["gpu-01", "gpu-02", "gpu-03"]),
        ("blackwell,!gpu-02", ["gpu-01", "gpu-03"]),
        ("!blackwell", ["h200-a", "local"]),
        ("gpu-0[12],h200-*", ["gpu-01", "gpu-02", "h200-a"]),
    ],
)
def test_limit_selects_by_host_and_group_globs(limit: str | None, expected: list[str]) -> None:
    assert select_names(HOSTS, GROUPS, limit) == expected


def test_limit_matching_nothing_is_a_usage_error_listing_names() -> None:
    with pytest.raises(UsageError) as caught:
        select_names(HOSTS, GROUPS, "gpu-9*")
    assert "gpu-9*" in caught.value.message
    assert "blackwell" in caught.value.hint


@pytest.mark.parametrize(
    ("spec", "folded"),
    [
        # ClusterShell keeps one width per range: Slurm's gpu-[001-1000] folds to the same names
        # written so that clush and pdsh read them too
        ("gpu-[001-1000]", "gpu-[001-999,1000]"),
        ("gpu-[01-03,05]", "gpu-[01-03,05]"),
        ("n[1-12]", "n[1-12]"),
        ("v[09-11]", "v[09-11]"),
        ("rack[1-2]-gpu[01-04]", "rack[1-2]-gpu[01-04]"),
        ("rack[1-2]-gpu[01-02],login1", "login1,rack[1-2]-gpu[01-02]"),
        ("gpu[01-08,10]", "gpu[01-08,10]"),
    ],
)
def test_compact_hosts_gives_back_the_hostlist_it_came_from(spec: str, folded: str) -> None:
    compacted = compact_hosts(expand_hostlist(spec))
    assert compacted == folded
    assert sorted(expand_hostlist(compacted)) == sorted(expand_hostlist(spec))


def test_compact_hosts_never_pads_a_name_that_was_not_padded() -> None:
    # ClusterShell holds several widths in one range set: gpu-5 stays gpu-5, gpu-100 stays 3 wide
    folded = compact_hosts(["gpu-001", "gpu-002", "gpu-5", "gpu-100"])
    assert folded == "gpu-[5,001-002,100]"
    assert expand_hostlist(folded) == ["gpu-5", "gpu-001", "gpu-002", "gpu-100"]


def test_cohort_by_is_a_top_level_jmespath() -> None:
    inventory = parse("""\
        cohort_by: "[gpu.gpus[0].name, gpu.interconnect]"
        hosts:
          gpu-01: {}
        """)
    assert inventory.cohort_by == "[gpu.gpus[0].name, gpu.interconnect]"
    assert parse("hosts: {gpu-01: {}}\n").cohort_by is None


@pytest.mark.parametrize(
    ("value", "message"),
    [("'gpu.['", "is not a JMESPath expression"), ("[1, 2]", "must be a JMESPath expression")],
)
def test_a_bad_cohort_by_names_its_line(value: str, message: str) -> None:
    with pytest.raises(InventoryError, match=message) as caught:
        parse(f"hosts:\n  gpu-01: {{}}\ncohort_by: {value}\n")
    assert caught.value.message.startswith("inv.yaml:3:")


def test_this_machine_is_the_built_in_inventory_as_its_parse_gives_it() -> None:
    """local_inventory() builds LOCAL_INVENTORY's document itself (no YAML parser loaded before
    this machine's host starts): the same hosts, settings and lines as parsing the text."""
    from fleet.inventory.fleet_yaml import LOCAL_INVENTORY, local_inventory

    assert local_inventory() == parse_inventory(LOCAL_INVENTORY, "<built-in local inventory>")
    assert local_inventory().hosts["local"].transport == "local"
