"""Run the `fleet` command in-process (click's CliRunner): fast, no subprocess, same exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import Result

from fleet.cli import main
from tests.conftest import ROOT
from tests.helpers import cli_runner

REAL_RUN_DIR = ROOT / "tests" / "probes" / "golden" / "real_run"
GPULESS = REAL_RUN_DIR / "gpuless_local.json"
LOOPBACK8 = REAL_RUN_DIR / "loopback8_two_odd.json"
H200X2 = REAL_RUN_DIR / "h200x2_run.json"
MIXED8 = REAL_RUN_DIR / "mixed8_loopback.json"  # 2× H200 and 8× RTX PRO 6000 (bench/mixed_fleet.py)


def invoke(tmp_path: Path, *args: str, columns: int = 200) -> Result:
    """`fleet ARGS` with its state (saved runs) under tmp_path and a terminal `columns` wide."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": str(columns)}
    return cli_runner().invoke(main, list(args), env=env, catch_exceptions=False)


def run_document(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def write_run(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    return path


def saved_runs_dir(tmp_path: Path) -> Path:
    """The runs folder of `invoke(tmp_path, …)`."""
    return tmp_path / "state" / "fleet" / "runs"


def save_document(tmp_path: Path, document: dict[str, Any], started: str, **changes: Any) -> Path:
    """`document` (a copy, `started` and `changes` set) saved in invoke's runs folder."""
    from fleet.models import Run
    from fleet.store import save_run

    document = {**json.loads(json.dumps(document)), "started": started, **changes}
    return save_run(Run.from_dict(document), saved_runs_dir(tmp_path))
