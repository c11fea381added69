"""Saved runs: private, atomic, and found again by latest/previous."""

from __future__ import annotations

import re
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


def write_document(tmp_path: Path, document: object) -> Path:
    import json

    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document))
    return path


def test_every_run_id_this_fleet_reads_loads_and_so_does_a_document_without_one(
    tmp_path: Path,
) -> None:
    document = make_run("2026-11-30T01:02:03.000Z").to_dict()
    assert document["schema"] == "fleet.run/2"
    without = {k: v for k, v in document.items() if k != "schema"}
    for written in ({**document, "schema": "fleet.run/1"}, document, without):
        assert read_run_file(write_document(tmp_path, written)).hosts["a"].status == "ok"


@pytest.mark.parametrize(
    ("schema", "message", "hint"),
    [
        ("fleet.run/9", "it is a fleet.run/9 document and this fleet reads fleet.run/1, fleet.run/2",
         "written by a newer fleet: upgrade fleet"),
        ("fleet.run/0", "it is a fleet.run/0 document", "docs/documents.md lists the run ids"),
        ("fleet.check/2", "it is a fleet.check/2 document, not a run", "`fleet runs` lists them"),
        ("fleet.diff/2", "it is a fleet.diff/2 document, not a run", "diff and check documents"),
        (7, "it is a 7 document, not a run", "`fleet probe --json`"),
    ],
)  # fmt: skip
def test_other_ids_are_refused_naming_the_id_and_the_fix(
    tmp_path: Path, schema: object, message: str, hint: str
) -> None:
    document = {**make_run("2026-11-30T01:02:03.000Z").to_dict(), "schema": schema}
    with pytest.raises(StoreError, match=re.escape(message)) as caught:
        read_run_file(write_document(tmp_path, document))
    assert hint in caught.value.hint


def test_a_document_that_is_no_object_or_has_no_host_map_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="it is a JSON list, not a run"):
        read_run_file(write_document(tmp_path, [1, 2]))
    document = {**make_run("2026-11-30T01:02:03.000Z").to_dict(), "hosts": ["a"]}
    with pytest.raises(StoreError, match="cannot read run"):  # was an AttributeError
        read_run_file(write_document(tmp_path, document))


def test_a_runs_exact_id_names_it_when_a_second_run_started_in_the_same_second(
    tmp_path: Path,
) -> None:
    """Issue 46, item 4: `X` and `X_2` both start with `X`; the exact id is not a prefix."""
    saved = [save_run(make_run("2026-11-30T01:00:00.000Z"), tmp_path) for _ in range(11)]
    first = "20261130T010000Z-abababab"
    assert [p.stem for p in saved[:2]] == [first, f"{first}_2"]
    for path in saved:
        assert resolve_run(path.stem, tmp_path) == path
        assert resolve_run(path.name, tmp_path) == path
    assert list_runs(tmp_path) == saved  # `_10` after `_9`: in the order they were saved
    assert resolve_run("latest", tmp_path) == saved[-1]
    with pytest.raises(StoreError, match="11 saved runs match '20261130T010000Z'"):
        resolve_run("20261130T010000Z", tmp_path)
