"""Wrong input meets words, not internals: a file of one kind handed where another goes is named
as what it is, with the flag or command that takes it (issue 37), as a user types it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import invoke_fleet, local_inventory

GOLDEN = ROOT / "tests" / "probes" / "golden" / "real_run"
PLAIN = GOLDEN / "h200x2_run.json"


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    out = tmp_path / "baseline.yaml"
    done = invoke_fleet(tmp_path, "baseline", str(PLAIN), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def said(stderr: str) -> str:
    """The error and hint lines (an earlier in-process --debug may add its log and cause chain)."""
    lines = stderr.splitlines()
    return "\n".join(line for line in lines if line.startswith(("error:", "hint:")))


def saved_run(tmp_path: Path) -> None:
    """One saved run in tmp_path's runs folder, so that `latest` names it."""
    runs = tmp_path / "state" / "fleet" / "runs"
    runs.mkdir(parents=True)
    shutil.copy(PLAIN, runs / "2026-01-01T000000Z-local.json")


def test_a_baseline_file_given_as_a_run_names_baseline_file(tmp_path: Path, baseline: Path) -> None:
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    done = invoke_fleet(
        tmp_path, "probe", "-i", inventory, "-p", "system", "--baseline", str(baseline)
    )
    assert done.returncode == 2, done.stderr
    assert f"{baseline}: it is a baseline file (fleet.baseline/1), not a run" in done.stderr
    assert f"--baseline-file {baseline}" in done.stderr
    assert "Expecting value" not in said(done.stderr)


def test_check_baseline_is_the_old_spelling_of_baseline_file(
    tmp_path: Path, baseline: Path
) -> None:
    done = invoke_fleet(tmp_path, "check", "--run", str(PLAIN), "--baseline", str(baseline))
    assert "deprecated: write --baseline-file FILE" in done.stderr
    assert done.returncode in (0, 32), done.stderr  # judged, as with --baseline-file
    assert "baseline-allreduce" in done.stdout + done.stderr or done.returncode == 0


def test_a_saved_run_given_to_check_as_a_baseline_says_it_is_a_run(tmp_path: Path) -> None:
    saved_run(tmp_path)
    done = invoke_fleet(tmp_path, "check", "--run", str(PLAIN), "--baseline-file", "latest")
    assert done.returncode == 2, done.stderr
    assert "latest is a saved run, not a baseline file" in done.stderr
    assert "fleet diff" in done.stderr
    assert "fleet probe --baseline" in done.stderr


def test_a_run_document_shown_as_a_baseline_says_which_command_takes_it(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "baseline", "--show", str(PLAIN))
    assert done.returncode == 2, done.stderr
    assert f"{PLAIN} is a run (fleet.run/1), not a baseline file" in done.stderr
    assert "fleet show RUN" in done.stderr
    assert "fleet baseline RUN" in done.stderr
    assert "unknown key" not in said(done.stderr)


@pytest.mark.parametrize("text", ["{}", "", "[1, 2]"])
def test_diff_of_a_file_that_is_no_run_names_the_file(tmp_path: Path, text: str) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text(text)
    done = invoke_fleet(tmp_path, "diff", str(empty))
    assert done.returncode == 2, done.stderr
    assert f"cannot read run {empty}:" in done.stderr
    assert "'hosts'" not in done.stderr
    assert "Expecting value" not in said(done.stderr)
    assert "fleet probe --json" in done.stderr  # what a run is


def test_a_probe_file_without_collect_is_refused_naming_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "myprobes"
    folder.mkdir()
    (folder / "clocks.py").write_text(
        '"""GPU clocks."""\n\n\ndef gather(options):\n    return {}\n'
    )
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    done = invoke_fleet(
        tmp_path, "probe", "-i", inventory, "--probe-dir", str(folder), "-p", "system,clocks"
    )
    assert done.returncode == 2, done.stderr
    assert "clocks.py:1: defines no collect(options);" in done.stderr
    assert "def collect(options):" in done.stderr
    assert "KeyError" not in done.stdout + done.stderr
    listed = invoke_fleet(tmp_path, "probes", "--probe-dir", str(folder))
    assert "✗" in listed.stdout
    assert "defines no collect" in listed.stdout


def test_a_check_document_given_as_a_run_says_what_it_is(tmp_path: Path) -> None:
    document = tmp_path / "check.json"
    document.write_text(json.dumps({"schema": "fleet.check/3", "rules": []}))
    done = invoke_fleet(tmp_path, "show", str(document))
    assert done.returncode == 2, done.stderr
    assert "it is a fleet.check/3 document, not a run" in done.stderr
