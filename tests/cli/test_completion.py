"""Shell completion: probe names, saved runs, an inventory's hosts and groups (click's protocol)."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.cli import main
from tests.conftest import ROOT
from tests.helpers import cli_runner

RECORDED = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"


def complete(tmp_path: Path, words: str) -> list[str]:
    """What bash completion offers for the last word of `fleet WORDS` (click's bash protocol)."""
    env = {
        "_FLEET_COMPLETE": "bash_complete",
        "COMP_WORDS": f"fleet {words}",
        "COMP_CWORD": str(len(f"fleet {words}".split(" ")) - 1),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    done = cli_runner().invoke(main, [], env=env, prog_name="fleet")
    return [line.split(",", 1)[1] for line in done.stdout.splitlines() if "," in line]


def test_probe_names_complete_after_a_comma(tmp_path: Path) -> None:
    assert complete(tmp_path, "probe -p sys") == ["system"]
    assert complete(tmp_path, "probe -p system,gp") == ["system,gpu", "system,gpubench"]


def test_saved_runs_and_aliases_complete(tmp_path: Path) -> None:
    runs = tmp_path / "state" / "fleet" / "runs"
    runs.mkdir(parents=True)
    (runs / "2026-11-30T020000Z_local.json").write_text(json.dumps({}))
    offered = complete(tmp_path, "show ")
    assert offered[:2] == ["latest", "previous"]
    assert "2026-11-30T020000Z_local" in offered
    assert complete(tmp_path, "diff 2026") == ["2026-11-30T020000Z_local"]


def test_limit_completes_the_inventory_s_hosts_and_groups(tmp_path: Path) -> None:
    inventory = ROOT / "inventory" / "blackwell.yaml"
    offered = complete(tmp_path, f"probe -i {inventory} -l gpu-0")
    assert "gpu-01" in offered
    assert "gpu-08" in offered
    assert complete(tmp_path, f"probe -i {inventory} -l black") == ["blackwell"]
    assert complete(tmp_path, f"probe -i {inventory} -l gpu-01,!gpu-0")[0].startswith(
        "gpu-01,!gpu-0"
    )


def test_a_broken_inventory_completes_nothing_and_says_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "bad.yaml"
    broken.write_text("hosts: [")
    assert complete(tmp_path, f"probe -i {broken} -l g") == []
