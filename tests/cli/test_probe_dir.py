"""Your own probes: --probe-dir and $FLEET_PROBE_DIR, shipped, listed, diffed like fleet's own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fleet.analysis.facts import declared_facts
from tests.helpers import invoke_fleet

SITE_PROBE = '''"""Application clocks of every GPU (a site's own probe)."""

FACTS = {"volatile": ["read_at"]}


def collect(options):
    return {"ok": True, "data": {"clocks_mhz": 1980, "read_at": 12.5}, "error": None}
'''


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "site-probes"
    folder.mkdir()
    (folder / "gpu_clocks.py").write_text(SITE_PROBE)
    return folder


def inventory(tmp_path: Path) -> str:
    path = tmp_path / "inv.yaml"
    path.write_text(f"hosts:\n  here: {{transport: local, python: {sys.executable}}}\n")
    return str(path)


def test_probe_in_probe_dir_runs_and_shows_in_the_run(tmp_path: Path, probe_dir: Path) -> None:
    done = invoke_fleet(
        tmp_path, "probe", "-i", inventory(tmp_path), "--probe-dir", str(probe_dir),
        "-p", "system,gpu_clocks", "--json", "-",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["hosts"]["here"]["probes"]["gpu_clocks"]
    assert result["status"] == "ok"
    assert result["data"]["clocks_mhz"] == 1980


def test_env_variable_lists_the_probe_and_its_facts_declaration(
    tmp_path: Path, probe_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = invoke_fleet(tmp_path, "probes", env={"FLEET_PROBE_DIR": str(probe_dir)})
    assert "gpu_clocks   Application clocks of every GPU" in done.stdout
    monkeypatch.setenv("FLEET_PROBE_DIR", str(probe_dir))
    assert declared_facts()["gpu_clocks"].volatile == ("read_at",)


def test_a_probe_named_like_a_built_in_one_is_refused(tmp_path: Path, probe_dir: Path) -> None:
    (probe_dir / "system.py").write_text(SITE_PROBE)
    done = invoke_fleet(tmp_path, "probes", "--probe-dir", str(probe_dir))
    assert done.returncode == 2
    assert "probe 'system' in" in done.stderr
    assert "has the name of another probe" in done.stderr


def test_a_missing_probe_dir_is_a_usage_error(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "probe", "--probe-dir", str(tmp_path / "nope"), "-p", "system")
    assert done.returncode == 2
    assert "does not exist" in done.stderr


def test_a_rule_may_read_a_probe_from_probe_dir(tmp_path: Path, probe_dir: Path) -> None:
    rules = tmp_path / "site.yaml"
    rules.write_text(
        "rules:\n"
        "  - id: clocks-high\n"
        "    severity: error\n"
        "    check: 'gpu_clocks.clocks_mhz >= `1900`'\n"
        "    fix: raise the application clocks\n"
    )
    done = invoke_fleet(
        tmp_path, "check", "--details", "-i", inventory(tmp_path), "--probe-dir", str(probe_dir),
        "-p", "gpu_clocks", "--rules", str(rules), "--no-save",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ pass clocks-high" in done.stdout
