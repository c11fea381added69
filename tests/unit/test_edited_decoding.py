"""A payload decoded as an edit of an earlier one of its kind and length (fleet/jsontext.py
EditedDecoder): whatever the text, the value, types and key order json.loads gives (or its
ValueError); the parts that did not change are the earlier value's objects, which stays as it was."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fleet.jsontext import EditedDecoder
from fleet.models import Run
from fleet.store import read_run_file, write_run_json
from tests.unit.helpers import fleet_run, real_gpu_payload, with_identity


def as_json_reads(decoder: EditedDecoder, text: str, kind: str = "gpu") -> None:
    """The decoder's answer for `text` is json.loads's, to the type and the key order."""
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(json.JSONDecodeError):
            decoder.decode(text, kind)
        return
    found = decoder.decode(text, kind)
    assert found == expected
    assert json.dumps(found) == json.dumps(expected)  # 1 and 1.0 and true, key order


def test_hosts_that_differ_in_their_uuids_share_the_rest_of_the_payload() -> None:
    decoder = EditedDecoder()
    first, second = (with_identity(real_gpu_payload(), host) for host in (1, 2))
    one = decoder.decode(json.dumps(first), "gpu")
    other = decoder.decode(json.dumps(second), "gpu")
    assert (one, other) == (first, second)
    assert other["topology"] is one["topology"]  # unchanged: the first payload's objects
    assert other["gpus"][0]["name"] is one["gpus"][0]["name"]
    assert other["gpus"] is not one["gpus"]
    assert other["gpus"][1] is not one["gpus"][1]
    assert one == first  # the first payload is not changed by the second's edits
    third = decoder.decode(json.dumps(with_identity(real_gpu_payload(), 3)), "gpu")
    assert third["gpus"][0]["uuid"] == "GPU-000003-00-4a1e"
    assert other == second


EDITS = [
    ('"NVIDIA', '"NVIDIB'),  # inside a string
    ('"memory_mib": 143771', '"memory_mib": 1437.1'),  # an int becomes a float
    ('"memory_mib": 143771', '"memory_mib": 1.4e05'),
    ('"memory_mib": 143771', '"memory_mib": "1437"'),  # a number becomes a string
    ('"pcie_gen": 5', '"pcie_gen": 0'),
    ('"restricted": false', '"restricted": "fal"'),
    ('"restricted": false', '"restricted": 1e-10'),
    ('"node_gpus": null', '"node_gpus": true'),
    ('"pcie_gen": 5', '"pcie_gex": 5'),  # a key: another layout
    ('"pcie_gen": 5, ', '"pcie_gen": 5 ,'),  # white space moves
    ('"pcie_gen": 5', '"pcie_gen": x'),  # not JSON
    ('"pcie_gen": 5', '"pcie_gen":05'),
    ('"NVIDIA', '"NVID\\"'),  # an escaped quote
    ('"NVIDIA', '"NVIDI\u00c9'),  # not ASCII
    ('"NVIDIA', '"NV", "'),  # a string becomes two members
    ('"mig_mode": "Disabled"', '"mig_mode": "Disab", 1'),
]


@pytest.mark.parametrize(("before", "after"), EDITS)
def test_every_edit_reads_as_json_loads_reads_it(before: str, after: str) -> None:
    decoder = EditedDecoder()
    text = json.dumps(with_identity(real_gpu_payload(), 1))
    assert before in text
    assert len(before) == len(after)
    decoder.decode(text, "gpu")
    as_json_reads(decoder, text.replace(before, after, 1))
    as_json_reads(decoder, text.replace(before, after))  # on every GPU
    as_json_reads(decoder, json.dumps(with_identity(real_gpu_payload(), 7)))


def test_random_characters_changed_read_as_json_loads_reads_them() -> None:
    """Any character of the text, changed to any printable one (most make another layout or
    no JSON at all): json.loads's value or its ValueError, every time."""
    rng = random.Random(49)
    text = json.dumps(with_identity(real_gpu_payload(), 1))
    decoder = EditedDecoder()
    decoder.decode(text, "gpu")
    for _ in range(1500):
        edited = list(text)
        for _ in range(rng.choice((1, 1, 2, 5))):
            edited[rng.randrange(len(text))] = chr(rng.randrange(32, 127))
        as_json_reads(decoder, "".join(edited))
    (reference,) = decoder.references.values()
    assert reference.hits > 100  # edits inside strings and numbers: read as edits


def test_a_repeated_key_and_odd_layouts_read_as_json_loads_reads_them() -> None:
    decoder = EditedDecoder()
    for kind, first, second in [
        ("repeated", '{"a": 1, "a": 2, "b": "x"}', '{"a": 3, "a": 2, "b": "y"}'),
        ("escaped key", '{"a\\"": 1, "b": "x"}', '{"a\\"": 2, "b": "y"}'),
        (
            "indented",
            '{\n  "a": [\n    1,\n    {"b": "x"}\n  ]\n}',
            '{\n  "a": [\n    2,\n    {"b": "y"}\n  ]\n}',
        ),
        ("list", '[{"a": "x"}, [], {}, [1.5, null]]', '[{"a": "y"}, [], {}, [2.5, true]]'),
        ("deep", '{"a": {"b": {"c": [{"d": "x"}]}}}', '{"a": {"b": {"c": [{"d": "z"}]}}}'),
        ("scalar", '"abc"', '"abd"'),
    ]:
        as_json_reads(decoder, first, kind)
        as_json_reads(decoder, second, kind)
        as_json_reads(decoder, second, kind)


def test_texts_of_a_length_that_never_match_are_decoded_plainly() -> None:
    """Payloads whose every number is their own (allreduce's timings): after a couple of tries
    their reference is given up, and each is decoded as json.loads decodes it."""
    decoder = EditedDecoder()
    for jitter in range(1, 8):  # 1000.1, 1001.1, ...: every row's number its own, in one length
        rows = [{"size": 1 << i, "latency_us": 1000 + i + jitter / 10} for i in range(80)]
        as_json_reads(decoder, json.dumps({"results": rows}), "allreduce")
    (reference,) = decoder.references.values()
    assert reference.misses >= 2
    assert reference.text == ""  # no longer kept


def test_a_run_reads_the_same_and_its_hosts_share_what_they_reported_alike(tmp_path: Path) -> None:
    """Plain (`--json FILE`) and saved: each host's GPU payload is its own (its UUIDs), its
    unchanged parts are shared with the hosts of its kind, and the run is the one saved."""
    saved = fleet_run(24, tmp_path / "saved")
    write_run_json(tmp_path / "run.json", saved)
    for run in (read_run_file(tmp_path / "run.json"), read_run_file(saved_path(tmp_path))):
        assert run == saved
        hosts = list(run.hosts.values())
        one, other = hosts[1].probes["gpu"].data, hosts[1 + 9].probes["gpu"].data
        assert one is not other
        assert one["gpus"] != other["gpus"]
        assert one["topology"] is other["topology"]


def saved_path(folder: Path) -> Path:
    (found,) = (folder / "saved").glob("*.json")
    return found


def test_nothing_is_lost_when_a_run_is_read_again(tmp_path: Path) -> None:
    saved = fleet_run(12, tmp_path / "saved")
    write_run_json(tmp_path / "run.json", saved)
    again: Run = read_run_file(tmp_path / "run.json")
    write_run_json(tmp_path / "again.json", again)
    assert (tmp_path / "again.json").read_text() == (tmp_path / "run.json").read_text()
