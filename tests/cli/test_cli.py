"""The `fleet` command as a user runs it: exit codes, errors, Ctrl-C, JSON output."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FAKES, ROOT
from tests.helpers import invoke_fleet as fleet
from tests.helpers import local_inventory


def test_local_probe_prints_real_facts_and_exits_zero(tmp_path: Path) -> None:
    done = fleet(
        tmp_path, "probe", "-i", str(ROOT / "inventory" / "local.yaml"), "-p", "system,packages"
    )
    assert done.returncode == 0, done.stderr
    assert os.uname().release in done.stdout  # the kernel, read on this machine
    assert "local" in done.stdout
    assert "ok" in done.stdout


def test_json_to_stdout_is_the_run_document(tmp_path: Path) -> None:
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    done = fleet(tmp_path, "probe", "-i", inventory, "-p", "system", "--json", "-")
    document = json.loads(done.stdout)
    assert document["schema"] == "fleet.run/2"
    assert document["hosts"]["here"]["probes"]["system"]["ok"] is True


def test_json_that_cannot_be_written_sets_exit_bit_64_and_the_run_is_still_saved(
    tmp_path: Path,
) -> None:
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    target = tmp_path / "no-such-dir" / "run.json"
    done = fleet(tmp_path, "probe", "-i", inventory, "-p", "system", "--json", str(target))
    assert done.returncode == 64, done.stderr
    assert f"cannot write {target}" in done.stderr
    assert len(list((tmp_path / "state" / "fleet" / "runs").glob("*.json"))) == 1
    checked = fleet(tmp_path, "check", "-i", inventory, "-p", "system", "--json", str(target))
    assert checked.returncode & 64, checked.stderr


@pytest.mark.parametrize("version", ["3.6", "3.7"])
def test_a_real_python_older_than_3_8_is_no_python(tmp_path: Path, version: str) -> None:
    candidates = [
        *glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"),
        shutil.which(f"python{version}"),
    ]
    old_python = next((c for c in candidates if c and "shims" not in c), None)
    if old_python is None:
        pytest.skip(f"no Python {version} on this machine")
    inventory = local_inventory(tmp_path, old={"transport": "local", "python": old_python})
    done = fleet(tmp_path, "probe", "-i", inventory, "-p", "system", "--json", "-")
    assert done.returncode == 4, done.stderr
    host = json.loads(done.stdout)["hosts"]["old"]
    assert host["status"] == "no_python"
    assert f"is Python {version}." in host["error"]
    assert "3.8+" in host["error"]


def test_bad_inventory_exits_2_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("hosts:\n  good: {}\n  bad: {port: 99999}\n")
    done = fleet(tmp_path, "probe", "-i", str(path))
    assert done.returncode == 2
    assert f"{path}:3: port 99999 is outside 1–65535" in done.stderr


def test_unknown_probe_exits_2_listing_the_valid_ones(tmp_path: Path) -> None:
    done = fleet(tmp_path, "probe", "-p", "sytem")
    assert done.returncode == 2
    assert "unknown probe 'sytem'" in done.stderr
    assert "system" in done.stderr


def test_missing_inventory_file_exits_2(tmp_path: Path) -> None:
    done = fleet(tmp_path, "probe", "-i", str(tmp_path / "nope.yaml"))
    assert done.returncode == 2
    assert "does not exist" in done.stderr


def test_hosts_prints_resolved_settings_without_contacting(tmp_path: Path) -> None:
    done = fleet(
        tmp_path,
        "hosts",
        "-i",
        str(ROOT / "inventory" / "blackwell.yaml"),
        "-l",
        "blackwell,!gpu-0[2-8]",
    )
    assert done.returncode == 0, done.stderr
    assert "ops@gpu-01:22" in done.stdout
    assert "gpu-02" not in done.stdout


def test_host_timeout_sets_bit_8_and_unreached_host_bit_4(tmp_path: Path) -> None:
    inventory = local_inventory(
        tmp_path,
        slow={"transport": "local", "python": str(FAKES / "bin" / "slow-python")},
        gone={"transport": "local", "python": "/nonexistent/python3"},
    )
    done = fleet(tmp_path, "probe", "-i", inventory, "-p", "system", "--timeout", "5")
    assert done.returncode == 4 | 8
    assert "timeout" in done.stdout
    assert "no_python" in done.stdout


def test_ctrl_c_saves_finished_hosts_and_exits_130(tmp_path: Path) -> None:
    inventory = local_inventory(
        tmp_path,
        fast={"transport": "local", "python": sys.executable},
        slow={"transport": "local", "python": str(FAKES / "bin" / "slow-python")},
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleet",
            "probe",
            "-i",
            inventory,
            "-p",
            "system",
            "--json",
            str(tmp_path / "run.json"),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(4)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=10)  # reads and closes the pipes
    assert time.monotonic() - sent < 8  # did not wait for the slow host (it sleeps 60 s)
    assert process.returncode == 130
    document = json.loads((tmp_path / "run.json").read_text())
    assert document["hosts"]["fast"]["status"] == "ok"
    assert document["hosts"]["slow"]["status"] == "interrupted"
    assert list((tmp_path / "state" / "fleet" / "runs").glob("*.json"))


def test_import_and_dir_flags_reach_their_probes(tmp_path: Path) -> None:
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    done = fleet(
        tmp_path,
        "probe",
        "-i",
        inventory,
        "-p",
        "imports,dir",
        "--json",
        "-",
        "--import",
        "json:NoSuchName|dumps",
        "--import",
        "no_such_module|os.path",
        "--dir",
        "json",
    )
    probes = json.loads(done.stdout)["hosts"]["here"]["probes"]
    results = probes["imports"]["data"]["results"]
    assert results["json:NoSuchName|dumps"]["resolved"] == "json:dumps"
    assert "NoSuchName" in results["json:NoSuchName|dumps"]["tried"][0]["error"]
    assert results["no_such_module|os.path"]["resolved"] == "os.path"
    assert list(probes["dir"]["data"]["modules"]) == ["json"]
    assert "dumps" in probes["dir"]["data"]["modules"]["json"]["names"]


def test_inventory_probe_args_apply_per_host_and_the_cli_wins(tmp_path: Path) -> None:
    inventory = local_inventory(
        tmp_path,
        a={
            "transport": "local",
            "python": sys.executable,
            "probe_args": {"dir": {"modules": ["json"]}},
        },
        b={
            "transport": "local",
            "python": sys.executable,
            "probe_args": {"dir": {"modules": ["os"]}},
        },
    )
    done = fleet(tmp_path, "probe", "-i", inventory, "-p", "dir", "--json", "-")
    hosts = json.loads(done.stdout)["hosts"]
    assert list(hosts["a"]["probes"]["dir"]["data"]["modules"]) == ["json"]
    assert list(hosts["b"]["probes"]["dir"]["data"]["modules"]) == ["os"]
    done = fleet(tmp_path, "probe", "-i", inventory, "-p", "dir", "--json", "-", "--dir", "re")
    hosts = json.loads(done.stdout)["hosts"]
    assert {next(iter(h["probes"]["dir"]["data"]["modules"])) for h in hosts.values()} == {"re"}


def test_no_allreduce_leaves_the_probe_out(tmp_path: Path) -> None:
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    done = fleet(
        tmp_path,
        "probe",
        "-i",
        inventory,
        "-p",
        "system,allreduce",
        "--no-allreduce",
        "--json",
        "-",
    )
    assert list(json.loads(done.stdout)["hosts"]["here"]["probes"]) == ["system"]
