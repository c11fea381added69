"""Small things a first hour trips over (issue 24, item 15): `1 host`, "did you mean" for a
mistyped probe, an ambiguous run prefix lists its candidates, `check --help` says where the packs
are, and `--ssh-config` completes file names."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.checks import available_packs, pack_path
from fleet.cli import main
from fleet.errors import StoreError
from fleet.models import HostOutcome, Run
from fleet.render.html.page import Report, render_html
from fleet.render.terminal.run import summary_line
from fleet.store import resolve_run, save_run
from tests.helpers import cli_runner, invoke_fleet


def one_host_run(started: str = "2026-11-30T02:00:00.000Z") -> Run:
    outcome = HostOutcome(name="here", status="ok", address="localhost")
    return Run("0", started, started, "a" * 64, {"here": outcome}, probes=("system",))


def test_one_host_is_one_host_not_one_hosts() -> None:
    assert summary_line(one_host_run()).plain.startswith("1 host: 1 ok")
    from fleet.analysis.across_hosts.diff import compare_hosts

    run = one_host_run()
    page = render_html(Report(run, compare_hosts(run.hosts.values(), {})))
    assert "1 host ·" in page
    assert "1 hosts" not in page


def test_the_probe_run_says_one_host(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "probe", "-p", "system", "--no-save")
    assert done.returncode == 0, done.stderr
    assert "1 host: 1 ok" in done.stdout
    assert "1 hosts" not in done.stdout


def test_a_mistyped_probe_gets_did_you_mean(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "probe", "-p", "sytem", "--no-save")
    assert done.returncode == 2
    assert "error: unknown probe 'sytem'" in done.stderr
    assert "did you mean 'system'?" in done.stderr


def test_an_ambiguous_run_prefix_lists_its_candidates(tmp_path: Path) -> None:
    for started in ("2026-11-30T02:00:00.000Z", "2026-11-30T03:00:00.000Z"):
        save_run(one_host_run(started), tmp_path)
    with pytest.raises(StoreError) as caught:
        resolve_run("20261130T0", tmp_path)
    shown = caught.value.render()
    assert "2 saved runs match '20261130T0'" in shown
    assert "20261130T020000Z-aaaaaaaa" in shown
    assert "20261130T030000Z-aaaaaaaa" in shown
    with pytest.raises(StoreError, match="no saved run matches 'nope'"):
        resolve_run("nope", tmp_path)


def test_check_help_names_the_packs_and_where_they_are(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "check", "--help")
    assert done.returncode == 0
    for name in available_packs():
        assert name in done.stdout
        assert str(pack_path(name).parent) in done.stdout  # on one line: copied as it is


def test_ssh_config_completes_file_names(tmp_path: Path) -> None:
    words = "hosts --ssh-config ~/.ss"
    env = {
        "_FLEET_COMPLETE": "bash_complete",
        "COMP_WORDS": f"fleet {words}",
        "COMP_CWORD": str(len(f"fleet {words}".split(" ")) - 1),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    done = cli_runner().invoke(main, [], env=env, prog_name="fleet")
    assert done.stdout.splitlines() == ["file,~/.ss"]  # the shell completes the file name
