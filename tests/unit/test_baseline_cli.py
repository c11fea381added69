"""`fleet baseline`, `fleet check --baseline`, `fleet probe --baseline-file`, `fleet diff
--baseline-file`, as a user types them, on the real 2×H200 runs: the same verdict in the
terminal, the JSON check document, JUnit and the HTML report; exit codes; bad files."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from fleet.schemas import all_schemas, schema_for
from tests.conftest import ROOT
from tests.helpers import invoke_fleet

GOLDEN = ROOT / "tests" / "probes" / "golden" / "real_run"
PLAIN = GOLDEN / "h200x2_run.json"
MATRIX = GOLDEN / "h200x2_matrix_run.json"
MiB = 1 << 20
EXIT_DRIFT, EXIT_CHECK_FAILED = 16, 32
CUT_LINE = "local (2× H200): eager 256 MiB busbw 301 → 241 GB/s (band ≥ 271 GB/s)"


def errors(kind: str, document: Any) -> list[str]:
    """Every way `document` breaks the `kind` schema (empty: it validates)."""
    registry: Registry[Any] = Registry().with_resources(
        (uri, Resource.from_contents(schema)) for uri, schema in all_schemas().items()
    )
    validator = Draft202012Validator(schema_for(kind), registry=registry)
    return [f"{list(e.absolute_path)}: {e.message[:300]}" for e in validator.iter_errors(document)]


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    out = tmp_path / "baseline.yaml"
    done = invoke_fleet(tmp_path, "baseline", str(PLAIN), str(MATRIX), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def write(tmp_path: Path, name: str, document: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def cut_run(tmp_path: Path, factor: float = 0.8) -> Path:
    """The plain run with its eager 256 MiB bus bandwidth scaled."""
    document = json.loads(PLAIN.read_text())
    for row in document["hosts"]["local"]["probes"]["allreduce"]["data"]["results"]:
        if row["bytes"] == 256 * MiB and row["mode"] == "eager":
            row["busbw_gbps"] *= factor
    return write(tmp_path, "cut.json", document)


def test_fleet_baseline_writes_the_file_and_says_what_it_holds(tmp_path: Path) -> None:
    out = tmp_path / "b.yaml"
    done = invoke_fleet(tmp_path, "baseline", str(PLAIN), str(MATRIX), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text().startswith("# A fleet baseline")
    assert f"wrote {out}: 1 cohort(s), 142 measurement(s) from 2 run(s)" in done.stdout
    assert "made on: torch 2.11.0+cu130 · CUDA 13.0 · NCCL 2.28.9 · driver 580.159.04" in (
        done.stdout
    )
    to_stdout = invoke_fleet(tmp_path, "baseline", str(PLAIN), "-o", "-")
    assert to_stdout.stdout.startswith("# A fleet baseline")


def test_show_prints_the_bands_and_all_of_them_with_all(tmp_path: Path, baseline: Path) -> None:
    shown = invoke_fleet(tmp_path, "baseline", "--show", str(baseline))
    assert shown.returncode == 0, shown.stderr
    assert "2× NVIDIA H200 · nvlink · 1 host: local · 2 run(s)" in shown.stdout
    assert "    graph 8 B latency " not in shown.stdout  # the first 12 of each family
    assert "… 40 more (--all lists them)" in shown.stdout
    every = invoke_fleet(tmp_path, "baseline", "--show", str(baseline), "--all")
    (line,) = [x for x in every.stdout.splitlines() if x.startswith("    graph 8 B latency ")]
    assert line.split() == ["graph", "8", "B", "latency", "12.6", "µs", "≤", "17.2", "n=2"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "name the known-good runs"),
        ((str(PLAIN),), "-o FILE"),
        (("--show", "x.yaml", str(PLAIN)), "give no RUN, -o or --json"),
    ],
)
def test_fleet_baseline_usage_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = invoke_fleet(tmp_path, "baseline", *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_check_passes_a_real_run_and_prints_bus_bandwidth_as_share_of_line_rate(
    tmp_path: Path, baseline: Path
) -> None:
    done = invoke_fleet(
        tmp_path, "check", "--details", "--run", str(MATRIX), "--baseline-file", str(baseline)
    )
    assert done.returncode & EXIT_CHECK_FAILED == 0, done.stdout
    assert "✓ pass baseline-allreduce error" in done.stdout
    assert "✓ pass baseline-allreduce-matrix error" in done.stdout
    plain = invoke_fleet(tmp_path, "check", "--details", "--run", str(PLAIN))  # no baseline at all
    assert "line rate 450 GB/s per direction (NVLink 4 × 18 links × 25 GB/s)" in plain.stdout
    assert "eager 256 MiB: 67% of line rate, 301 GB/s" in plain.stdout


def test_check_fails_a_slower_copy_naming_host_size_value_and_band_everywhere(
    tmp_path: Path, baseline: Path
) -> None:
    run = cut_run(tmp_path)
    junit, html = tmp_path / "check.xml", tmp_path / "report.html"
    args = ("check", "--details", "--run", str(run), "--baseline-file", str(baseline))
    done = invoke_fleet(tmp_path, *args, "--junit", str(junit), "--html", str(html))
    assert done.returncode & EXIT_CHECK_FAILED, done.stdout
    assert "✗ fail baseline-allreduce error" in done.stdout
    assert CUT_LINE in done.stdout
    assert "versions: torch 2.11.0+cu130 · CUDA 13.0 · NCCL 2.28.9" in done.stdout
    assert (
        "check failed: local fail 1 error rule(s); 1 error failure(s) — baseline-allreduce on local"
        in done.stdout
    )
    # JUnit: the same line, one test case per rule and host
    suite = next(s for s in ET.parse(junit).getroot() if s.get("name") == "baseline-allreduce")
    failure = suite.find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == CUT_LINE.replace(" (2× H200)", "")
    # the JSON check document: the same verdict, every measurement beside it
    document = json.loads(invoke_fleet(tmp_path, *args, "--json", "-").stdout)
    assert errors("check", document) == []
    assert f"baseline {baseline}" in document["rules_from"]
    rule = next(r for r in document["rules"] if r["id"] == "baseline-allreduce")
    assert rule["kind"] == "baseline"
    assert rule["hosts"]["local"]["verdict"] == "fail"
    assert rule["hosts"]["local"]["observed"] == [CUT_LINE.split(": ", 1)[1]]
    measurements = document["baseline"]["hosts"]["local"]["measurements"]
    failed = [m for m in measurements if m["verdict"] == "fail"]
    assert [(m["name"], m["judged"], m["low"]) for m in failed] == [
        ("allreduce eager 256 MiB busbw_gbps", "low", 271.3)
    ]
    # the HTML report: the verdict, and the baseline's band behind the curves
    page = html.read_text()
    assert "eager 256 MiB busbw 301 → 241 GB/s (band ≥ 271 GB/s)" in page
    assert 'class="band baseline"' in page
    assert "of the line rate, 450 GB/s per direction" in page


def test_check_with_a_missing_measurement_is_incomplete_never_passed(
    tmp_path: Path, baseline: Path
) -> None:
    document = json.loads(PLAIN.read_text())
    data = document["hosts"]["local"]["probes"]["allreduce"]["data"]
    data["results"] = [r for r in data["results"] if r["bytes"] != 8]
    run = write(tmp_path, "short.json", document)
    done = invoke_fleet(tmp_path, "check", "--details", "--run", str(run), "--baseline-file", str(baseline),
                        "--json", "-")  # fmt: skip
    verdict = next(r for r in json.loads(done.stdout)["rules"] if r["id"] == "baseline-allreduce")
    assert verdict["hosts"]["local"]["verdict"] == "unknown"
    assert (
        "the run lacks 2 of the baseline's 52 allreduce measurement(s): eager 8 B latency"
        in (verdict["hosts"]["local"]["reason"])
    )
    strict = invoke_fleet(tmp_path, "check", "--details", "--run", str(run), "--baseline-file", str(baseline),
                          "--strict")  # fmt: skip
    assert strict.returncode & EXIT_CHECK_FAILED


def test_check_says_when_the_baseline_does_not_know_the_cohort(
    tmp_path: Path, baseline: Path
) -> None:
    document = json.loads(PLAIN.read_text())
    for gpu in document["hosts"]["local"]["probes"]["gpu"]["data"]["gpus"]:
        gpu["name"] = "NVIDIA B200"
    run = write(tmp_path, "b200.json", document)
    done = invoke_fleet(
        tmp_path, "check", "--details", "--run", str(run), "--baseline-file", str(baseline)
    )
    said = " ".join(done.stdout.split())  # the reason is said once, under `not judged:`
    assert (
        f"on local: cohort 2× NVIDIA B200 · nvlink is not in the "
        f"baseline {baseline} (it knows: 2× NVIDIA H200 · nvlink)"
    ) in said


def test_a_bad_baseline_file_stops_check_before_anything_names_its_line_and_the_fix(
    tmp_path: Path, baseline: Path
) -> None:
    text = baseline.read_text().replace("band: {k: 3.0, floor: 0.1}", "band: {k: -1, floor: 0.1}")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    line = text.splitlines().index("band: {k: -1, floor: 0.1}") + 1
    done = invoke_fleet(
        tmp_path, "check", "--details", "--run", str(PLAIN), "--baseline-file", str(bad)
    )
    assert done.returncode == 2
    assert f"error: {bad}:{line}: k: -1 is not a positive number" in done.stderr
    assert "hint: e.g. k: 3.0" in done.stderr
    missing = invoke_fleet(
        tmp_path, "check", "--details", "--run", str(PLAIN), "--baseline-file", "no.yaml"
    )
    assert "baseline file no.yaml does not exist" in missing.stderr
    assert "fleet baseline RUN [RUN…] -o FILE" in missing.stderr


def test_probe_baseline_file_judges_the_fresh_run_and_says_what_it_could_not(
    tmp_path: Path, baseline: Path
) -> None:
    """This machine has no GPU: its cohort is not in the H200 baseline; said, and no exit bit."""
    done = invoke_fleet(tmp_path, "probe", "-p", "system", "--baseline-file", str(baseline))
    assert done.returncode & EXIT_DRIFT == 0, done.stdout
    text = done.stdout.replace("\n", " ")
    assert f"baseline {baseline} · 1 host(s)" in text
    assert "is not in the baseline" in text
    assert "check incomplete" in text
    runs = sorted((tmp_path / "state" / "fleet" / "runs").glob("*.json"))
    bad = invoke_fleet(tmp_path, "probe", "-p", "system", "--baseline-file", "no.yaml")
    assert bad.returncode == 2
    assert "baseline file no.yaml does not exist" in bad.stderr
    assert sorted((tmp_path / "state" / "fleet" / "runs").glob("*.json")) == runs  # not probed


def test_diff_judges_measurement_drift_against_the_bands(tmp_path: Path, baseline: Path) -> None:
    plain_new = copy.deepcopy(json.loads(MATRIX.read_text()))
    new = write(tmp_path, "new.json", plain_new)
    by_tolerance = invoke_fleet(tmp_path, "diff", str(PLAIN), str(new))
    assert "allreduce graph 8 B latency_us" in by_tolerance.stdout  # 74% > 25%
    banded = invoke_fleet(tmp_path, "diff", str(PLAIN), str(new), "--baseline-file",
                          str(baseline), "--json", "-")  # fmt: skip
    changes = json.loads(banded.stdout)["changes"]
    # the two known-good runs are their band's two ends: 8 B moved beyond the half-width
    assert {c["fact"] for c in changes if c["kind"] == "measure"} == {
        "allreduce eager 8 B latency_us",
        "allreduce graph 8 B latency_us",
    }
    one_run = invoke_fleet(tmp_path, "diff", str(PLAIN), "--baseline-file", str(baseline))
    assert one_run.returncode == 2
    said = " ".join(one_run.stderr.split())  # wrapped at 80 columns, a path kept whole
    assert f"fleet check --run {PLAIN} --baseline-file {baseline}" in said
