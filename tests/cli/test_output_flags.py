"""One way to say where output goes (issue 37): `--json FILE` (`-`: stdout) writes each command's
JSON document, every file written is said in one line on stderr, and the old spellings still work
for one release with a deprecation message."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.cli.inprocess import LOOPBACK8
from tests.helpers import invoke_fleet, local_inventory
from tests.schema_check import errors


def test_probe_says_each_file_it_writes(tmp_path: Path) -> None:
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    run, page = tmp_path / "run.json", tmp_path / "page.html"
    done = invoke_fleet(
        tmp_path, "probe", "-i", inventory, "-p", "system", "--json", str(run), "--html", str(page)
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote {run} (" in done.stderr
    assert f"wrote {page} (" in done.stderr
    assert json.loads(run.read_text())["schema"] == "fleet.run/2"


def test_check_json_is_the_check_document_and_format_json_its_old_spelling(
    tmp_path: Path,
) -> None:
    out = tmp_path / "check.json"
    to_file = invoke_fleet(tmp_path, "check", "--run", str(LOOPBACK8), "--json", str(out))
    assert to_file.returncode == 32, to_file.stderr
    assert f"wrote {out} (" in to_file.stderr
    document = json.loads(out.read_text())
    assert errors("check", document) == []
    assert "verdict" in to_file.stdout.lower()  # the terminal's report still on stdout
    old = invoke_fleet(tmp_path, "check", "--run", str(LOOPBACK8), "--format", "json")
    assert "--format json is deprecated: write --json -" in old.stderr
    assert json.loads(old.stdout) == document
    new = invoke_fleet(tmp_path, "check", "--run", str(LOOPBACK8), "--json", "-")
    assert json.loads(new.stdout) == document


def test_check_junit_says_its_file(tmp_path: Path) -> None:
    junit = tmp_path / "check.xml"
    done = invoke_fleet(tmp_path, "check", "--run", str(LOOPBACK8), "--junit", str(junit))
    assert f"wrote {junit} (" in done.stderr


def test_diff_and_show_write_their_document_beside_the_terminal(tmp_path: Path) -> None:
    out = tmp_path / "diff.json"
    done = invoke_fleet(tmp_path, "diff", str(LOOPBACK8), "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out} (" in done.stderr
    assert errors("diff", json.loads(out.read_text())) == []
    assert done.stdout.strip()  # the terminal's diff too
    shown = invoke_fleet(tmp_path, "show", str(LOOPBACK8), "--json", "-")
    assert json.loads(shown.stdout) == json.loads(out.read_text())


def test_a_json_file_that_cannot_be_written_is_exit_bit_64(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "diff.json"
    done = invoke_fleet(tmp_path, "diff", str(LOOPBACK8), "--json", str(target))
    assert done.returncode == 64, done.stderr
    assert f"cannot write {target}" in done.stderr


def test_check_baseline_given_a_saved_run_points_at_diff_and_probe(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "check", "--run", str(LOOPBACK8), "--baseline", "latest")
    assert done.returncode == 2, done.stderr
    assert "deprecated: write --baseline-file FILE" in done.stderr
    assert "latest is a saved run, not a baseline file" in done.stderr
    assert "fleet probe --baseline RUN" in done.stderr
