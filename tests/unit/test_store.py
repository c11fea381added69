"""Saved runs: private, atomic, and found again by latest/previous."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import StoreError
from fleet.models import HostOutcome, ProbeResult, Run
from fleet.store import list_runs, read_run_file, resolve_run, save_run


def make_run(started: str, secret: str = "") -> Run:
    probe = ProbeResult("ok", True, {"env": {"NCCL_X": secret}}, None, 0.5)
    outcome = HostOutcome(name="a", status="ok", address="a", probes={"nccl": probe})
    return Run("0.1.0", started, started, "ab" * 32, {"a": outcome}, ("nccl",))


def test_saved_run_round_trips_and_is_private(tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    path = save_run(make_run("2026-11-30T01:02:03.000Z"), runs_dir)
    assert path.stat().st_mode & 0o777 == 0o600
    assert runs_dir.stat().st_mode & 0o777 == 0o700
    loaded = read_run_file(path)
    assert loaded.hosts["a"].probes["nccl"].data == {"env": {"NCCL_X": ""}}
    assert [p.name for p in runs_dir.iterdir()] == [path.name]  # no temp file left behind


def test_secrets_are_masked_before_saving(tmp_path: Path) -> None:
    token = "ghp_" + "b" * 36
    path = save_run(make_run("2026-11-30T01:02:03.000Z", token), tmp_path)
    assert token not in path.read_text()


def test_latest_and_previous(tmp_path: Path) -> None:
    first = save_run(make_run("2026-11-30T01:00:00.000Z"), tmp_path)
    second = save_run(make_run("2026-11-30T02:00:00.000Z"), tmp_path)
    assert list_runs(tmp_path) == [first, second]
    assert resolve_run("latest", tmp_path) == second
    assert resolve_run("previous", tmp_path) == first


def test_missing_previous_run_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no previous run"):
        resolve_run("previous", tmp_path)


def test_identical_payloads_are_stored_once_and_shared_when_loaded(tmp_path: Path) -> None:
    import json

    probe = ProbeResult("ok", True, {"modules": {"torch": {"names": ["a"] * 500}}}, None, 0.5)
    hosts = {
        f"h{i}": HostOutcome(name=f"h{i}", status="ok", address="x", probes={"dir": probe})
        for i in range(50)
    }
    run = Run("0.1.0", "2026-11-30T01:00:00.000Z", "", "cd" * 32, hosts, ("dir",))
    path = save_run(run, tmp_path)
    saved = json.loads(path.read_text())
    assert len(saved["payloads"]) == 1
    loaded = read_run_file(path)
    datas = {id(o.probes["dir"].data) for o in loaded.hosts.values()}
    assert len(datas) == 1
    assert loaded.hosts["h7"].probes["dir"].data == probe.data
