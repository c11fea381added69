"""Reading a run and drift's comparison do their work once per host read and per distinct
answer, counted, not timed: results read straight into ProbeResult objects (no document made to
be read again), no host read twice because the buffer ended inside it, drift's comparisons per
pair of payload classes (hosts whose payloads differ only in fields left out compare as one),
and masked payloads dumped by marshal into keys equal only for equal data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet import rundoc
from fleet.analysis.classes import FactCache, dump_of
from fleet.analysis.facts import ProbeFacts
from fleet.api import drift
from fleet.errors import StoreError
from fleet.models import ProbeResult, Run
from fleet.store import expand_payloads, read_run_file
from tests.unit.helpers import calls, fleet_run

HOSTS = 48
AT_MOST = 1.2  # what twice the hosts, with the same distinct answers, may cost


def forms(run: Run, folder: Path) -> list[Path]:
    """`run` written in the plain and in the saved form."""
    plain, saved = folder / "plain.json", folder / "saved.json"
    plain.write_text("".join(rundoc.compact_pieces(run)))
    saved.write_text("".join(rundoc.saved_pieces(run)))
    return [plain, saved]


def test_results_are_read_straight_into_probe_results(tmp_path: Path) -> None:
    """Both forms read to the run their JSON gives, no result made from a document."""
    run = fleet_run(12, tmp_path / "saved")
    for path in forms(run, tmp_path):
        with calls() as made:
            read = read_run_file(path)
        assert read == Run.from_dict(expand_payloads(json.loads(path.read_text())))
        results = sum(len(outcome.probes) for outcome in run.hosts.values())
        assert made["read"] == len(run.hosts) + results  # each made once, of what was matched
        assert made["from_dict"] == 1  # the run: no host or result made from a document
        first = next(iter(read.hosts.values()))
        assert all(type(result.data) is dict for result in first.probes.values())


def test_a_saved_run_missing_a_payload_is_refused(tmp_path: Path) -> None:
    run = fleet_run(2, tmp_path / "saved")
    _, saved = forms(run, tmp_path)
    document = json.loads(saved.read_text())
    document["payloads"].popitem()
    saved.write_text(json.dumps(document))
    with pytest.raises(StoreError, match="cannot read run"):
        read_run_file(saved)


def test_a_host_of_an_unknown_status_is_refused_after_the_documents_id(tmp_path: Path) -> None:
    """Hosts are made as they are read, but what is wrong is said in the order it was: a
    newer document's id first, then a host's status."""
    run = fleet_run(2, tmp_path / "saved")
    for path in forms(run, tmp_path):
        text = path.read_text().replace('{"status": "ok", "error"', '{"status": "new", "error"')
        path.write_text(text)
        with pytest.raises(StoreError, match="unknown status 'new'"):
            read_run_file(path)
        path.write_text(text.replace('"fleet.run/2"', '"fleet.run/9"'))
        with pytest.raises(StoreError, match=r"it is a fleet\.run/9 document"):
            read_run_file(path)


def test_no_host_is_read_twice_at_a_buffer_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document of many chunks: each host is matched by its layout once (none started again
    because the buffer ended inside it, none read member by member)."""
    monkeypatch.setattr(rundoc, "CHUNK", 1 << 17)
    run = fleet_run(120, tmp_path / "saved")
    for path in forms(run, tmp_path):
        assert path.stat().st_size > 2 * rundoc.CHUNK  # the buffer ends inside hosts
        with calls() as made:
            read_run_file(path)
        assert made["_fleet_host"] == len(run.hosts)
        assert made["_object"] == 0


def test_drift_compares_each_pair_of_answers_once(tmp_path: Path) -> None:
    """Hosts whose payloads differ only in what is left out (their GPUs' UUIDs and serials,
    timings) and that measure alike are one pair of answers: compared once, at N hosts as at
    2N."""
    compared = []
    for count in (HOSTS, 2 * HOSTS):
        old, new = (fleet_run(count, tmp_path / f"{seed}-{count}", seed=seed) for seed in (1, 2))
        with calls() as made:
            drift(old, new)
        compared.append(made["_probe_changes"])
    assert 0 < compared[1] <= AT_MOST * compared[0]


def test_payloads_of_one_class_share_its_facts() -> None:
    cache = FactCache({"p": ProbeFacts(identity=("uuid",))})
    one, two = (
        ProbeResult("ok", True, {"uuid": uuid, "model": "H200"}, None, 0.1) for uuid in "ab"
    )
    other = ProbeResult("ok", True, {"uuid": "c", "model": "B200"}, None, 0.1)
    assert cache.part("p", one)[1] is cache.part("p", two)[1]
    assert cache.part("p", one)[0] == cache.part("p", two)[0]
    assert cache.part("p", one)[0] != cache.part("p", other)[0]
    assert cache.flattened == 2


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"a": 1}, {"a": True}),
        ({"a": 1}, {"a": 1.0}),
        ({"a": 0.0}, {"a": -0.0}),
        ({"a": [1]}, {"a": (1,)}),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # another order: only flattened again
        ({"a": "1"}, {"a": 1}),
    ],
)
def test_dumps_differ_for_data_that_differs(one: Any, other: Any) -> None:
    assert dump_of(one) != dump_of(other)


def test_dumps_are_equal_for_equal_data_however_shared() -> None:
    shared = "x" * 40
    twice = {"a": shared, "b": shared, "c": [shared, shared]}
    apart = json.loads(json.dumps(twice))  # equal, no object shared
    assert dump_of(twice) == dump_of(apart)
    odd = {"a": set}  # a type: no marshal for it, its repr
    assert dump_of(odd) == repr(odd)
