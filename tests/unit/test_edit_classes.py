"""A payload the run reader made as an edit of another (fleet/jsontext.py, Run.payload_edits) is
classed by the fact cache as the payload it edits, without a masked dump, where every edit is at a
field its class leaves out; any other edit is classed as any payload is. Either way the classes,
facts and every command's answer are those of the cache that knows no edits."""

from __future__ import annotations

import copy
import json
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet import collector, rundoc
from fleet.analysis.classes import FactCache
from fleet.analysis.facts import run_declarations
from fleet.api import Judging, assess_run
from fleet.jsontext import EditedDecoder
from fleet.models import HostOutcome, ProbeResult, Run
from fleet.render.documents import fleet_diff_document
from fleet.store import read_run_file, write_run_json
from tests.unit.helpers import fleet_run, real_gpu_payload, with_identity


def decoded(texts: list[str]) -> tuple[list[Any], EditedDecoder]:
    decoder = EditedDecoder()
    return [decoder.decode(text, "gpu") for text in texts], decoder


def test_the_decoder_keeps_what_each_edit_edits_and_where() -> None:
    (one, other, same), decoder = decoded(
        [json.dumps(with_identity(real_gpu_payload(), host)) for host in (1, 2, 1)]
    )
    assert same is one  # the same text: the same value, no edit
    assert list(decoder.edits) == [id(other)]
    value, edited, paths = decoder.edits[id(other)]
    assert value is other
    assert edited is one
    fields = {(path[0], path[2]) for path in paths}
    assert fields == {("gpus", "uuid"), ("gpus", "serial")}
    assert {path[1] for path in paths} == set(range(len(one["gpus"])))


def gpu_results(changes: list[dict[str, Any]]) -> tuple[list[ProbeResult], EditedDecoder]:
    """A GPU payload per host (its own UUIDs and serials, then `changes` of its own), read as a
    run reader reads them."""
    payloads = []
    for host, change in enumerate(changes, start=1):
        payload = with_identity(real_gpu_payload(), host)
        payload.update(change)
        payloads.append(json.dumps(payload))
    values, decoder = decoded(payloads)
    return [ProbeResult("ok", True, value, None, 0.1) for value in values], decoder


def classed(results: list[ProbeResult], decoder: EditedDecoder | None) -> tuple[FactCache, list]:
    run = read_declarations_run()
    cache = FactCache(run_declarations([run]))
    if decoder is not None:
        cache.read_as_edits(decoder.edits)
    return cache, [(cache.part("gpu", r), cache.payload_class("gpu", r)) for r in results]


def read_declarations_run() -> Run:
    return Run("test", "2026-12-01T10:00:00Z", "", "", {}, probes=("gpu",))


def test_identity_edits_are_classed_as_what_they_edit_without_a_dump() -> None:
    results, decoder = gpu_results([{}] * 40)
    plain_cache, plain = classed(results, None)
    cache, found = classed(results, decoder)
    assert found == plain  # the same keys, facts and classes
    assert len({kind for _, kind in found}) == 1  # one class: they differ only in identities
    assert plain_cache.dumped >= 39
    assert cache.dumped < plain_cache.dumped
    assert cache.dumped <= 1


def test_an_edit_of_a_compared_field_is_classed_by_its_dump() -> None:
    """A driver version of the same length is an edit too, but of a field the diff compares: the
    payload is of another class, found as for any payload."""
    changes = [{}, {}, {"driver_version": "580.159.05"}, {}, {"driver_version": "580.159.05"}]
    results, decoder = gpu_results(changes)
    assert id(results[2].data) in decoder.edits  # read as an edit all the same
    _, plain = classed(results, None)
    cache, found = classed(results, decoder)
    assert found == plain
    keys = [key for (key, _), _ in found]
    assert keys[2] == keys[4] != keys[0] == keys[1] == keys[3]
    assert found[2][0][1].values["gpu.driver_version"] == "580.159.05"
    assert cache.dumped >= 2


def test_an_edit_of_another_status_is_not_taken_as_its_class() -> None:
    results, decoder = gpu_results([{}, {}])
    failed = ProbeResult("failed", False, results[1].data, "exit 1", 0.1)
    _, plain = classed([results[0], failed], None)
    _, found = classed([results[0], failed], decoder)
    assert found == plain
    assert found[0][0][1].values["_status.gpu"] == "ok"
    assert found[1][0][1].values["_status.gpu"] == "failed"


@pytest.fixture
def in_executable() -> Iterator[None]:
    """As in the fleet executable, where the reader hands its edits to the run (and shares the
    payloads of the run read before it): put back after."""
    collector._START_UP["executable"] = True
    try:
        yield
    finally:
        collector._START_UP["executable"] = False
        rundoc.LAST_READ.clear()


def test_a_run_read_in_the_executable_is_judged_as_without_its_edits(
    tmp_path: Path, in_executable: None
) -> None:
    saved = fleet_run(30, tmp_path / "saved")
    changed = copy.deepcopy(saved.to_dict())
    gpus = changed["hosts"]["gpu-00011"]["probes"]["gpu"]["data"]["gpus"]
    gpus[0]["driver_version"] = gpus[0]["driver_version"][:-1] + "9"  # an edit: compared
    write_run_json(tmp_path / "run.json", Run.from_dict(changed))
    rundoc.LAST_READ.clear()
    run = read_run_file(tmp_path / "run.json")
    assert len(run.payload_edits) >= 20  # the GPU and system payloads of most hosts
    without = Run.from_dict(run.to_dict())  # the same run, no edits known
    assert without == run
    assert not without.payload_edits
    documents = [
        fleet_diff_document(assess_run(r, Judging(rules=True), "run.json").diff)
        for r in (run, without)
    ]
    assert documents[0] == documents[1]
    assert "gpu-00011" in json.dumps(documents[0])  # its driver version diverges


def test_in_process_a_run_keeps_no_edits(tmp_path: Path) -> None:
    """Fleet called in-process (the API, tests): its callers may change a payload they read, so
    no payload is classed by what it was read as."""
    saved = fleet_run(12, tmp_path / "saved")
    write_run_json(tmp_path / "run.json", saved)
    assert read_run_file(tmp_path / "run.json").payload_edits == {}


def test_results_and_hosts_pickle_as_they_were_and_hold_no_dict(tmp_path: Path) -> None:
    """The workers' stream pickles hosts and results; slotted (Python 3.10+), they hold no
    __dict__ (a 20,000-host run: 43 MB less), made by the reader or by hand alike."""
    write_run_json(tmp_path / "run.json", fleet_run(3, tmp_path / "saved"))
    run = read_run_file(tmp_path / "run.json")
    made = ProbeResult("failed", False, {"a": [1]}, "exit 1", 0.5, "tail", "frames")
    for outcome in (*run.hosts.values(), HostOutcome("h", "ok", "10.0.0.1", probes={"x": made})):
        again = pickle.loads(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))
        assert again == outcome
        assert type(again) is HostOutcome
        assert all(type(r) is ProbeResult for r in again.probes.values())
        if sys.version_info >= (3, 10):
            assert not hasattr(outcome, "__dict__")
            assert not any(hasattr(r, "__dict__") for r in outcome.probes.values())
