"""`--gpubench`: the opt-in probe is never in the default set, runs when asked for by the flag
or by name, and a whole `fleet probe` + `fleet check` on this machine (local transport, the host
runner, its fork server) with simulated GPUs shows only what is off and names the slow GPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleet import api
from fleet.api import probing
from tests.cli.inprocess import invoke, run_document
from tests.conftest import ROOT

FAKE_TORCH = ROOT / "tests" / "fakes" / "stubs" / "torch_gpubench"
FAKE_SMI_DIR = ROOT / "tests" / "fakes" / "gpubench_bin"


def test_gpubench_is_opt_in() -> None:
    assert "gpubench" not in probing.build_probe_bundle(api.ProbeOptions()).probes
    assert (
        "gpubench" in probing.build_probe_bundle(api.ProbeOptions(values={"gpubench": True})).probes
    )
    assert list(probing.build_probe_bundle(api.ProbeOptions(probes=["gpubench"])).probes) == [
        "gpubench"
    ]
    both = probing.build_probe_bundle(
        api.ProbeOptions(probes=["system"], values={"gpubench": True})
    )
    assert list(both.probes) == ["system", "gpubench"]
    assert api.ProbeOptions(values={"gpubench": True}).host_timeout_s >= 180
    assert probing.probe_args_from(api.ProbeOptions(values={"gpubench": True, "quick": True}))[
        "gpubench"
    ] == {"quick": True}
    assert "gpubench" not in probing.probe_args_from(api.ProbeOptions(values={"quick": True}))


def test_probe_and_check_on_simulated_gpus_name_the_slow_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = {"gpus": 2, "scale": [1.0, 0.8]}
    monkeypatch.setenv("FLEET_FAKE_GPUBENCH", json.dumps(machine))
    monkeypatch.setenv("PYTHONPATH", str(FAKE_TORCH))
    monkeypatch.setenv("PATH", f"{FAKE_SMI_DIR}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "run.json"
    inventory = str(ROOT / "inventory" / "local.yaml")
    probed = invoke(
        tmp_path, "probe", "-i", inventory, "-p", "system", "--gpubench", "--quick",
        "--no-save", "--json", str(out),
    )  # fmt: skip
    assert "gpubench: what is off" in probed.output, probed.output
    assert "slow GPU: GPU1 (GPU-fa4e0001-0000-0000-0000-000000000001, 00000000:19:00.0)" in (
        " ".join(probed.output.split())
    )
    result = run_document(out)["hosts"]["local"]["probes"]["gpubench"]
    assert result["status"] == "ok"
    checked = invoke(tmp_path, "check", "--details", "--run", str(out), "--pack", "inference")
    assert checked.exit_code & 32
    text = " ".join(checked.output.split())
    assert "✗ fail gpubench-gpu-vs-host-best" in text
    assert "observed GPU1 (GPU-fa4e0001" in text


def test_on_this_gpuless_machine_gpubench_is_absent_and_the_host_ok(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    inventory = str(ROOT / "inventory" / "local.yaml")
    probed = invoke(
        tmp_path, "probe", "-i", inventory, "-p", "gpubench", "--no-save", "--json", str(out)
    )
    outcome = run_document(out)["hosts"]["local"]
    assert outcome["status"] == "ok", probed.output
    result = outcome["probes"]["gpubench"]
    assert result["status"] == "absent"
    assert result["error"].startswith(("no GPU: CUDA not available", "torch not importable"))
    assert "failed probes" not in probed.output
