"""A probe of your own that raises: the terminal error names its file and line, --json keeps the
traceback's tail (and validates against the run schema), --debug prints it (issue 24, item 7)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import invoke_fleet
from tests.schema_check import errors

RAISER = '''"""A site's probe with a bug in it."""


def read_clocks():
    raise RuntimeError("boom")


def collect(options):
    return {"ok": True, "data": {"clocks": read_clocks()}, "error": None}
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myprobes").mkdir()
    (tmp_path / "myprobes" / "raiser.py").write_text(RAISER)
    (tmp_path / "inv.yaml").write_text(
        f"hosts:\n  here: {{transport: local, python: {sys.executable}}}\n"
    )
    return tmp_path


def probe(site: Path, *more: str) -> tuple[int, str, str]:
    done = invoke_fleet(
        site, "probe", "-i", "inv.yaml", "--no-save", "--probe-dir", "myprobes",
        "-p", "system,raiser", *more,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_the_terminal_error_names_the_probe_file_and_line(site: Path) -> None:
    code, out, _ = probe(site)
    assert code == 8  # a probe failed
    assert "probe raised RuntimeError: boom (myprobes/raiser.py:5)" in out


def test_json_keeps_the_traceback_tail_and_validates(site: Path) -> None:
    code, out, _ = probe(site, "--json", "-")
    assert code == 8
    document = json.loads(out)
    result = document["hosts"]["here"]["probes"]["raiser"]
    assert result["error"] == "probe raised RuntimeError: boom (myprobes/raiser.py:5)"
    assert 'File "myprobes/raiser.py", line 9, in collect' in result["traceback"]
    assert 'File "myprobes/raiser.py", line 5, in read_clocks' in result["traceback"]
    assert "traceback" not in document["hosts"]["here"]["probes"]["system"]
    assert errors("run", document) == []


def test_debug_prints_the_whole_tail(site: Path) -> None:
    _, _, err = probe(site, "--debug")
    assert "probe raiser raised:" in err
    assert 'File "myprobes/raiser.py", line 5, in read_clocks' in err
    assert 'raise RuntimeError("boom")' in err
