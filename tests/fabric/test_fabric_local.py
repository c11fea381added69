"""`fleet fabric` through the local transport (no root, no sshd): a master that fails is not the
master again in the next round."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import run_fleet


@pytest.mark.torch
def test_a_failed_master_is_not_master_of_the_next_round(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA: there the NCCL ranks fail at set_device")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        f"defaults: {{python: {sys.executable}, transport: local}}\n"
        "hosts:\n"
        "  one: {probe_args: {fabric: {devices: [0]}}}\n"
        "  two: {probe_args: {fabric: {devices: [1]}}}\n"
    )
    out = tmp_path / "fabric.json"
    result = run_fleet(
        tmp_path, "fabric", "-i", str(inventory), "--sizes", "8", "--timeout", "30",
        "--json", str(out), "--no-save",
    )  # fmt: skip
    section = json.loads(out.read_text())["fabric"]
    first, ring = section["pairs"][0], section["ring"]
    assert first["status"] == "failed"
    assert first["error"].startswith(f"master {first['master']}: rank 0 failed to use its GPU")
    assert ring["master"] != first["master"]
    assert result.returncode & 8


@pytest.mark.torch
def test_a_busy_rendezvous_port_costs_one_launch_and_is_said(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    holder.listen()
    busy = holder.getsockname()[1]
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        f"defaults: {{python: {sys.executable}, transport: local}}\nhosts:\n  one: {{}}\n  two: {{}}\n"
    )
    out = tmp_path / "fabric.json"
    try:
        result = run_fleet(
            tmp_path, "fabric", "-i", str(inventory), "--backend", "gloo", "--sizes", "8",
            "--timeout", "30", "--master-port", str(busy), "--no-group",
            "--json", str(out), "--no-save",
        )  # fmt: skip
    finally:
        holder.close()
    assert result.returncode == 0, result.stderr
    (pair,) = json.loads(out.read_text())["fabric"]["pairs"]
    assert (pair["status"], pair["correct"]) == ("ok", True), pair
    assert pair["busy_ports"] == [busy]
    assert pair["port"] != busy
