"""Test helpers shared by every suite: run the `fleet` command in-process, as a user would type it.

In-process (click's CliRunner) is the default: no interpreter start per test, and a failure shows
the traceback. Tests that need a real process (Ctrl-C, a second interpreter) start one themselves.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import yaml
from click.testing import CliRunner

from fleet.cli import main


def cli_runner() -> CliRunner:
    """A CliRunner that keeps stderr apart on every click fleet supports (8.1 needs asking)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()  # click >= 8.2: always apart


def invoke_fleet(
    tmp_path: Path, *args: str, env: Mapping[str, str] | None = None, columns: int = 200
) -> subprocess.CompletedProcess[str]:
    """`fleet ARGS` in this process, with its own state folder under tmp_path; returns what a
    subprocess would (returncode, stdout, stderr)."""
    full_env = {"XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": str(columns), **(env or {})}
    result = cli_runner().invoke(main, list(args), env=full_env, catch_exceptions=False)
    return subprocess.CompletedProcess(
        ["fleet", *args], result.exit_code, result.stdout, result.stderr
    )


def local_inventory(tmp_path: Path, **hosts: dict) -> str:
    """An inventory file of `hosts` (name: settings) under tmp_path; returns its path."""
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump({"hosts": hosts}))
    return str(path)
