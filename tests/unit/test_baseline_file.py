"""A baseline file (fleet.baseline/1): readable YAML that reads back as it was written and
validates against its JSON Schema; every mistake in one is an error naming FILE:LINE and the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from fleet import api
from fleet.analysis.baselines.build import build_baseline
from fleet.analysis.baselines.file import BaselineFileError, baseline_text, parse_baseline
from fleet.analysis.facts import declared_facts
from fleet.models import Run
from fleet.schemas import schema_for
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "probes" / "golden" / "real_run"


@pytest.fixture(scope="module")
def text() -> str:
    runs = [
        (str(path), Run.from_dict(json.loads(path.read_text())))
        for path in (GOLDEN / "h200x2_run.json", GOLDEN / "h200x2_matrix_run.json")
    ]
    made = build_baseline(
        runs, declared_facts(), fleet_version="0.1.0", created="2026-12-01T00:00:00Z"
    )
    return baseline_text(made)


def test_the_file_reads_back_as_written_and_validates_against_its_schema(text: str) -> None:
    again = parse_baseline(text, "b.yaml")
    assert baseline_text(again) == text
    data = yaml.safe_load(text)
    assert data["schema"] == "fleet.baseline/1"
    assert list(Draft202012Validator(schema_for("baseline")).iter_errors(data)) == []
    assert (
        again.lines["2× NVIDIA H200 · nvlink"]
        == text.splitlines().index('  "2× NVIDIA H200 · nvlink":') + 1
    )


def test_the_file_is_one_line_per_measurement_with_its_versions_in_reach(text: str) -> None:
    lines = text.splitlines()
    assert lines[0].startswith("# A fleet baseline")
    assert (
        '      "allreduce graph 8 B latency_us": {median: 12.59, low: 7.945, high: 17.23, n: 2}'
        in lines
    )
    assert (
        '      "allreduce eager 256 MiB busbw_gbps": {median: 301.4, low: 271.3, high: 331.6, n: 2}'
        in lines
    )
    assert (
        '    versions: {torch: [2.11.0+cu130], cuda: ["13.0"], nccl: [2.28.9], '
        "driver: [580.159.04]}" in lines
    )  # "13.0" quoted: YAML would read it as a number


def test_the_schema_refuses_what_the_reader_refuses(text: str) -> None:
    data = yaml.safe_load(text)
    cohort = data["cohorts"]["2× NVIDIA H200 · nvlink"]
    cohort["measurements"]["allreduce graph 8 B latency"] = {
        "median": 1,
        "low": 1,
        "high": 1,
        "n": 1,
    }
    assert list(Draft202012Validator(schema_for("baseline")).iter_errors(data))


def broken(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


CASES = {
    "not YAML": ("band: {k: 3.0, floor: 0.1}", "band: k: 3.0", "band:",
                 "not valid YAML", "quoting"),
    "unknown top key": ("cohort_by: null", "cohort_by: null\ncohorts_by: x", "cohorts_by:",
                        "unknown key 'cohorts_by' at the top level", "allowed: schema"),
    "newer schema": ("schema: fleet.baseline/1", "schema: fleet.baseline/2", "schema:",
                     "'fleet.baseline/2' is not fleet.baseline/1", "upgrade fleet"),
    "not a baseline": ("schema: fleet.baseline/1", "schema: fleet.run/2", "schema:",
                       "is not fleet.baseline/1", "fleet baseline RUN"),
    "bad name": ('"allreduce graph 8 B latency_us"', '"allreduce graph 8 B latency"',
                 "allreduce graph 8 B latency", "is not a measurement fleet takes",
                 "'allreduce graph 8 B latency_us'"),
    "band upside down": ("{median: 12.59, low: 7.945, high: 17.23, n: 2}",
                         "{median: 12.59, low: 30.0, high: 17.23, n: 2}", "graph 8 B latency",
                         "low 30 ≤ median 12.59 ≤ high 17.23 does not hold", "low end first"),
    "no count": ("{median: 12.59, low: 7.945, high: 17.23, n: 2}",
                 "{median: 12.59, low: 7.945, high: 17.23}", "graph 8 B latency",
                 "lacks n", "{median: 12.6"),
    "text for a number": ("{median: 12.59, low: 7.945, high: 17.23, n: 2}",
                          "{median: fast, low: 7.945, high: 17.23, n: 2}", "graph 8 B latency",
                          "median: 'fast' is not a non-negative number", "e.g. median:"),
    "bad k": ("band: {k: 3.0, floor: 0.1}", "band: {k: 0, floor: 0.1}", "band:",
              "k: 0 is not a positive number", "e.g. k: 3.0"),
    "cohort key": ("    runs: 2\n", "    runs: 2\n    rack: r1\n", "rack:",
                   "cohort '2× NVIDIA H200 · nvlink': unknown key 'rack'", "allowed: label"),
    "duplicate": ('      "allreduce graph 8 B latency_us"', '      "allreduce eager 8 B latency_us"',
                  "allreduce eager 8 B latency_us", "duplicate key", "already set on line"),
}  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "where", "message", "hint"), CASES.values(), ids=list(CASES)
)
def test_a_bad_baseline_file_is_an_error_naming_file_line_and_the_fix(
    text: str, old: str, new: str, where: str, message: str, hint: str
) -> None:
    bad = broken(text, old, new)
    with pytest.raises(BaselineFileError) as caught:
        parse_baseline(bad, "base.yaml")
    error = caught.value
    line = int(re.match(r"base\.yaml:(\d+): ", error.message)[1])  # type: ignore[index]
    found = [i for i, text_line in enumerate(bad.splitlines(), 1) if where in text_line]
    assert line in found, (error.message, found)
    assert message in error.message
    assert hint in error.hint
    assert error.exit_code == 2


def test_a_missing_or_empty_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(BaselineFileError, match="does not exist") as caught:
        api.load_baseline(tmp_path / "none.yaml")
    assert "fleet baseline RUN" in caught.value.hint
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(BaselineFileError, match=r"empty\.yaml:1: a baseline is a mapping"):
        api.load_baseline(empty)


def test_a_baseline_is_written_atomically_and_loaded_with_its_path(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "base.yaml"
    written = api.write_baseline(parse_baseline(text, "x"), path)
    assert written == path
    assert path.read_text() == text
    assert not list(tmp_path.glob(".*partial"))
    assert api.load_baseline(path).path == str(path)
