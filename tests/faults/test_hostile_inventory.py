"""Hostile or broken inventories: each is rejected with file:line before any connection (the sshd
log shows none), and nothing it smuggles in ever runs (no canary file appears)."""

from __future__ import annotations

import getpass
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import run_fleet
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults

HOST = "{host}: {{address: {address}, port: {port}}}"


def bomb(ok: str) -> str:
    """A billion laughs inside probe options (any keys are valid there): 9 levels of 9 aliases,
    387 million strings once expanded, as a bundle's JSON would expand them."""
    lines = ['      l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 9):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"      l{level}: &l{level} [{refs}]")
    options = "\n".join(lines)
    return f"hosts:\n  {ok}\n  x:\n    probe_args:\n     system:\n{options}\n"


# name → (inventory body under `hosts:` or a whole document, the message it must give)
CASES: dict[str, tuple[Callable[[str, str], str], str]] = {
    "tab": (lambda ok, c: f"hosts:\n  {ok}\n\tother: {{}}\n", "not valid YAML"),
    "duplicate-key": (lambda ok, c: f"hosts:\n  {ok}\n  dup: {{}}\n  dup: {{}}\n", "duplicate key"),
    "on-as-name": (lambda ok, c: f"hosts:\n  {ok}\n  on: {{}}\n", "'on'"),
    "no-as-name": (lambda ok, c: f"hosts:\n  {ok}\n  no: {{}}\n", "'no'"),
    "alias-bomb": (lambda ok, c: bomb(ok), "alias"),
    "50-MB": (lambda ok, c: f"hosts:\n  {ok}\n" + "# padding\n" * 5_300_000, "MB"),
    "not-utf8": (lambda ok, c: f"hosts:\n  {ok}\n  caf\udce9: {{}}\n", "UTF-8"),
    "semicolon": (lambda ok, c: f"hosts:\n  {ok}\n  'a;rm -rf /': {{}}\n", "a;rm -rf /"),
    "command-substitution": (
        lambda ok, c: f"hosts:\n  {ok}\n  '$(touch {c})': {{}}\n",
        "$(touch",
    ),
    "address-substitution": (
        lambda ok, c: f"hosts:\n  {ok}\n  x: {{address: '$(touch {c})'}}\n",
        "$(touch",
    ),
    "proxycommand-name": (
        lambda ok, c: f"hosts:\n  {ok}\n  '-oProxyCommand=touch {c}': {{}}\n",
        "-oProxyCommand",
    ),
    "proxycommand-user": (
        lambda ok, c: f"hosts:\n  {ok}\n  x: {{user: '-oProxyCommand=touch {c}'}}\n",
        "-oProxyCommand",
    ),
    "proxycommand-jump": (
        lambda ok, c: f"hosts:\n  {ok}\n  x: {{jump: 'u@-oProxyCommand=touch{c}'}}\n",
        "-oProxyCommand",
    ),
    "python-injection": (
        lambda ok, c: f"hosts:\n  {ok}\n  x: {{python: 'python3;touch {c}'}}\n",
        "python3;touch",
    ),
    "newline": (lambda ok, c: f'hosts:\n  {ok}\n  "a\\nb": {{}}\n', "not a valid host name"),
    "port-0": (lambda ok, c: f"hosts:\n  {ok}\n  x: {{port: 0}}\n", "port 0"),
    "port-70000": (lambda ok, c: f"hosts:\n  {ok}\n  x: {{port: 70000}}\n", "port 70000"),
    "probe-args-list": (
        lambda ok, c: f"hosts:\n  {ok}\n  x: {{probe_args: {{system: [1, 2]}}}}\n",
        "probe_args",
    ),
}


@pytest.fixture(scope="module")
def target(farm: SshdFarm) -> str:
    farm.start("inventory-target", "127.0.59.1")
    return "inventory-target"


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_inventory_is_rejected_before_any_connection(
    farm: SshdFarm, tmp_path: Path, target: str, case: str
) -> None:
    host = farm.hosts[target]
    canary = tmp_path / "canary"
    ok_line = HOST.format(host=target, address=host.address, port=host.port)
    make, expected = CASES[case]
    header = (
        f"defaults: {{user: {getpass.getuser()}, identity_file: {farm.client_key}, "
        f"known_hosts: {tmp_path / 'known_hosts'}, python: {sys.executable}}}\n"
    )
    farm.known_hosts(tmp_path / "known_hosts", [target])
    inventory = tmp_path / "inv.yaml"
    inventory.write_bytes((header + make(ok_line, str(canary))).encode("utf-8", "surrogateescape"))
    assert host.log is not None
    before = host.log.read_text()

    started = time.monotonic()
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", timeout=60)

    assert result.returncode == 2, (result.stdout, result.stderr)
    assert re.search(rf"{re.escape(str(inventory))}:\d+: ", result.stderr), result.stderr
    assert expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 20
    time.sleep(0.1)
    assert host.log.read_text() == before  # not even a TCP connection
    assert not canary.exists()
    assert result.run is None
