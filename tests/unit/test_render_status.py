"""The status table at fleet scale: hosts that ended alike share a row, trouble stays visible."""

from __future__ import annotations

import dataclasses
import io
import json

from rich.console import Console

from fleet.models import HostOutcome, Run
from fleet.render.terminal.run import status_table
from tests.conftest import ROOT

RECORDED = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"


def refused(name: str, address: str) -> HostOutcome:
    """What fleet.transport.ssh says of a closed port: the host's own name and address in it."""
    return HostOutcome(
        name,
        "unreachable",
        address,
        f"cannot connect to {name} (ops@{address}:22): refused",
        f"is sshd listening there? try: ssh -p 22 ops@{address} true",
    )


def unknown_key(name: str, address: str, fingerprint: str) -> HostOutcome:
    return HostOutcome(
        name, "hostkey_unknown", address,
        f"host key of {name} (ops@{address}:22) is not known: {fingerprint}",
        "check the fingerprint out of band, then run again with --accept-new",
    )  # fmt: skip


def rendered(outcomes: list[HostOutcome]) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(status_table(outcomes))
    return console.file.getvalue()  # type: ignore[attr-defined]


def recorded_fleet(size: int) -> list[HostOutcome]:
    """`size` hosts gpu-001…: copies of one real host's outcome; gpu-007 and gpu-042 refuse
    connections, gpu-100 and gpu-101 show unknown host keys."""
    run = Run.from_dict(json.loads(RECORDED.read_text()))
    template = next(o for o in run.hosts.values() if o.status == "ok")
    outcomes = []
    for index in range(1, size + 1):
        outcome = dataclasses.replace(
            template, name=f"gpu-{index:03d}", elapsed_s=1.0 + index / 100
        )
        address = f"10.0.{index // 250}.{index % 250}"
        if index in (7, 42):
            outcome = refused(outcome.name, address)
        if index in (100, 101):
            outcome = unknown_key(outcome.name, address, f"SHA256:{index}AbC+/x")
        outcomes.append(outcome)
    return outcomes


def missing_identity(name: str) -> HostOutcome:
    return HostOutcome(
        name, "auth_failed", name,
        f"cannot read identity file /home/ops/.ssh/id_fleet for {name}: no such file",
        "check identity_file in the inventory",
    )  # fmt: skip


def test_a_small_fleet_folds_hosts_that_ended_alike_too() -> None:
    """Nine hosts with the same missing identity file: one row, not nine (issue 12, item 2)."""
    outcomes = [missing_identity(f"gpu-{i:02d}") for i in range(1, 10)]
    text = rendered([*recorded_fleet(2), *outcomes])
    rows = [line for line in text.splitlines() if "gpu-" in line]
    assert len(rows) == 2, text
    assert "gpu-[01-09] (9 hosts)" in rows[0]
    assert "auth_failed" in rows[0]
    assert text.count("no such file") == 1
    assert "gpu-[001-002] (2 hosts)" in rows[1]
    assert " ok " in rows[1]


def test_a_host_alone_in_how_it_ended_keeps_its_own_row() -> None:
    text = rendered(recorded_fleet(8))
    rows = [line for line in text.splitlines() if "gpu-" in line]
    assert len(rows) == 2, text
    assert rows[0].lstrip("│ ").startswith("gpu-007 ")
    assert "hosts)" not in rows[0]


def test_a_big_fleet_folds_hosts_that_ended_alike_trouble_first() -> None:
    outcomes = recorded_fleet(1000)
    text = rendered(outcomes)
    rows = [line for line in text.splitlines() if "hosts)" in line]
    assert len(rows) == 3, text
    refusing, unknown, fine = rows  # trouble first
    assert "gpu-[007,042] (2 hosts)" in refusing
    assert "unreachable" in refusing
    assert "e.g. cannot connect to gpu-007 (ops@10.0.0.7:22): refused" in refusing
    assert "gpu-[100-101] (2 hosts)" in unknown
    assert "hostkey_unknown" in unknown
    assert "gpu-[001-006,008-041,043-099,102-1000] (996 hosts)" in fine
    assert " ok " in fine
    probes = len(outcomes[0].probes)
    assert f"{probes}/{probes}" in fine
    assert "1.0–11.0s" in fine
