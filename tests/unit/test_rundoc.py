"""Run documents read and written a host at a time (fleet/rundoc.py): a plain `--json` document
loads with its equal payloads shared, as a saved run does, in a buffer that does not grow with the
hosts; the writers make json.dumps's text, a host at a time."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from fleet import jsontext, rundoc
from fleet.errors import StoreError
from fleet.models import Run
from fleet.store import deduplicate_payloads, read_run_file, save_run, write_run_json
from tests.unit.helpers import REAL_RUN, fleet_run

SHARED_PROBES = ("dir", "imports", "packages", "torch")  # equal on every host of a kind


def plain_copy(run: Run, path: Path) -> Run:
    """`run` written as `fleet probe --json FILE` writes it, and read back."""
    write_run_json(path, run)
    return read_run_file(path)


def test_a_plain_documents_equal_payloads_are_one_object(tmp_path: Path) -> None:
    run = plain_copy(fleet_run(20, tmp_path / "saved"), tmp_path / "run.json")
    hosts = list(run.hosts.values())
    first, again = hosts[1], hosts[1 + 9]  # the cycle of templates is 9 hosts long
    for probe in SHARED_PROBES:
        assert first.probes[probe].data == again.probes[probe].data
        assert first.probes[probe].data is again.probes[probe].data, probe
    # what is the host's own (hostname, GPU UUIDs) stays its own
    assert first.probes["system"].data is not again.probes["system"].data
    assert first.probes["system"].data["hostname"] == first.name


def test_a_plain_document_shares_as_much_as_the_saved_run(tmp_path: Path) -> None:
    saved = fleet_run(30, tmp_path / "saved")
    plain = plain_copy(saved, tmp_path / "run.json")
    assert plain == saved

    def distinct(run: Run) -> int:
        return len({id(r.data) for h in run.hosts.values() for r in h.probes.values()})

    assert distinct(plain) == distinct(saved)


def test_the_indented_document_loads_shared_too(tmp_path: Path) -> None:
    saved = fleet_run(12, tmp_path / "saved")
    path = tmp_path / "run.json"
    with path.open("w") as handle:
        rundoc.write_indented_run(saved, handle.write)
    run = read_run_file(path)
    assert run == saved
    hosts = list(run.hosts.values())
    assert hosts[0].probes["dir"].data is hosts[9].probes["dir"].data


def real_runs() -> list[Run]:
    runs = []
    for path in sorted(REAL_RUN.glob("*.json")):
        document = json.loads(path.read_text())
        if "hosts" in document:
            runs.append(Run.from_dict(document))
    return runs


def test_the_writers_make_json_dumps_text() -> None:
    runs = real_runs()
    assert len(runs) > 5
    for run in runs:
        document = run.to_dict()
        plain = json.dumps(document, ensure_ascii=False, default=str)
        assert "".join(rundoc.compact_pieces(run)) == plain
        saved = json.dumps(deduplicate_payloads(run.to_dict()), ensure_ascii=False, default=str)
        assert "".join(rundoc.saved_pieces(run)) == saved
        out = io.StringIO()
        rundoc.write_indented_run(run, out.write)
        assert out.getvalue() == json.dumps(document, indent=2) + "\n"


def test_an_empty_run_and_secrets_are_written_as_before(tmp_path: Path) -> None:
    empty = Run.from_dict({"started": "2026-12-01T10:00:00Z", "hosts": {}})
    assert "".join(rundoc.compact_pieces(empty)) == json.dumps(empty.to_dict())
    run = fleet_run(2, tmp_path / "saved")
    leaked = run.to_dict()
    leaked["hosts"]["gpu-00001"]["probes"]["system"]["data"]["note"] = "token hf_" + "a" * 34
    text = "".join(rundoc.compact_pieces(Run.from_dict(leaked)))
    assert "hf_" + "a" * 34 not in text
    assert json.loads(text)["hosts"]["gpu-00000"] == leaked["hosts"]["gpu-00000"]


def test_the_writers_hand_over_a_host_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The largest piece written does not grow with the hosts (bounded memory)."""
    monkeypatch.setattr(jsontext, "PIECE", 1)  # the indented text: handed over as it is made
    largest = []
    for count in (20, 80):
        run = fleet_run(count, tmp_path / str(count))
        pieces = [len(p) for p in rundoc.compact_pieces(run)]
        pieces += [len(p) for p in rundoc.saved_pieces(run)]
        written: list[str] = []
        rundoc.write_indented_run(run, written.append)
        largest.append(max(*pieces, *map(len, written)))
    assert largest[1] <= 1.2 * largest[0]


@pytest.mark.parametrize("chunk", [1, 5, 64, 4096])
def test_any_chunk_size_reads_what_json_loads_reads(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundoc, "CHUNK", chunk)
    run = real_runs()[0]
    indented = io.StringIO()
    rundoc.write_indented_run(run, indented.write)
    texts = [
        "".join(rundoc.compact_pieces(run)),
        "".join(rundoc.saved_pieces(run)),
        indented.getvalue(),
        ' {"hosts" :{ "a\\"b" : {"status":"ok","probes":{"p\\u00e9":{"data":[1, 2.5e3]}}}} } ',
        '{"hosts": {}, "n": 12345678901234567890, "x": true}',
        "[1, 2]",
    ]
    for text in texts:
        assert rundoc.read_document(io.StringIO(text)) == json.loads(text)


def test_the_buffer_holds_about_a_chunk_and_a_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundoc, "CHUNK", 4096)
    run = fleet_run(120, tmp_path / "saved")
    text = "".join(rundoc.compact_pieces(run))
    longest = max(len(json.dumps(h.to_dict())) for h in run.hosts.values())
    seen: list[int] = []
    more = rundoc._Text.more

    def counted(self: Any) -> bool:
        seen.append(len(self.buffer) - self.at)
        return more(self)

    monkeypatch.setattr(rundoc._Text, "more", counted)
    rundoc.read_document(io.StringIO(text))
    assert len(text) > 10 * (4096 + 2 * longest)  # the document is far bigger than the bound
    assert max(seen) <= 4096 + 2 * longest


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"hosts": {"a": {"status": "ok", "probes": {"p": {"data": [1, 2}}}}}', "character"),
        ('{"hosts": {"a": {"status": "ok"', "character"),
        ('{"hosts": {}} {"more": 1}', "extra data at character 14"),
        ('{"hosts": {1: {}}}', "character"),
    ],
)
def test_a_broken_document_is_a_store_error_naming_the_place(
    text: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "broken.json"
    path.write_text(text)
    with pytest.raises(StoreError, match=f"cannot read run {path}: .*{says}"):
        read_run_file(path)


def test_a_saved_run_reads_as_before(tmp_path: Path) -> None:
    run = fleet_run(10, tmp_path / "first")
    again = read_run_file(save_run(run, tmp_path / "second"))
    assert again == run
    hosts = list(again.hosts.values())
    assert hosts[0].probes["dir"].data is hosts[9].probes["dir"].data


def test_a_payload_that_looks_like_it_ends_early_is_read_whole() -> None:
    """The end of a seen payload is found by what follows it ("error", then "elapsed_s"); a
    payload holding that very text (keys not sorted) is still read whole, never cut there."""
    inner = {
        "x": {"error": None, "elapsed_s": 1},
        "y": [{"error": "e", "elapsed_s": 2}],
        "z": 3,
        "error": None,
        "elapsed_s": 4,
    }
    cut = {"x": {"error": None}}  # seen first: a whole payload that a cut could look like
    payloads = [cut, inner, inner, {'a"b': 1, "c": 2}]
    hosts = {
        f"h{i}": {"status": "ok", "probes": {"p": result(data)}} for i, data in enumerate(payloads)
    }
    for indent in (None, 2):
        text = json.dumps({"hosts": hosts}, indent=indent)
        read = rundoc.read_document(io.StringIO(text))
        assert read == json.loads(text)
        probes = [read["hosts"][f"h{i}"]["probes"]["p"]["data"] for i in range(3)]
        assert probes[1] is probes[2]


def result(data: Any) -> dict[str, Any]:
    return {"status": "ok", "ok": True, "data": data, "error": None, "elapsed_s": 0.1}
