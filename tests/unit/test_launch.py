"""The launch seam (fleet.transport.launch): the start-up alarm line, the wrapper the local and SSH
transports start the interpreter under (run here with /bin/sh), and the controller's reading of
the wrapper's first line."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from fleet.execution.bundle import build_bundle
from fleet.fabric import launch as fabric_launch
from fleet.transport.launch import (
    ALARM_HEAD,
    LAUNCH_GRACE_S,
    ZLIB_LAUNCH_ARGS,
    LaunchReport,
    compressed_script,
    launch_argv,
    launch_pgid,
    start_up_alarm,
    with_alarm,
)
from fleet.transport.ssh import end_group_command, remote_command

SCRIPT = b"# fleet start-up alarm, seconds: 7\nprint('ran')\n"


def test_deadline_is_the_start_up_alarm_plus_the_grace() -> None:
    argv = launch_argv("python3", SCRIPT)
    assert argv[4:7] == [str(7 + LAUNCH_GRACE_S), str(LAUNCH_GRACE_S), "python3"]
    script = build_bundle(["system"]).script({}, deadline_s=12.2, parallel=4)
    assert start_up_alarm(script) == 13


def test_the_bundle_and_fabric_scripts_start_with_the_one_alarm_line() -> None:
    assert with_alarm("print(1)\n", 0.2) == f"{ALARM_HEAD}1\nprint(1)\n".encode()
    scripts = [
        build_bundle(["system"]).script({}, deadline_s=30, parallel=4),
        fabric_launch.discover_script(30),
        fabric_launch.rank_script({}, 30 - fabric_launch.RANK_ALARM_SLACK_S, source="pass\n"),
        fabric_launch.shared_rank_script(
            {"h": {}}, 30 - fabric_launch.RANK_ALARM_SLACK_S, source="pass\n"
        ),
    ]
    assert [start_up_alarm(s) for s in scripts] == [30, 30, 30, 30]
    assert all(s.startswith(ALARM_HEAD.encode()) for s in scripts)


def test_wrapper_reports_its_process_group_then_runs_the_script(tmp_path: Path) -> None:
    done = subprocess.run(
        launch_argv(sys.executable, SCRIPT), input=SCRIPT, capture_output=True, timeout=30
    )
    first, rest = done.stdout.split(b"\n", 1)
    pgid = launch_pgid(first)
    assert pgid is not None
    assert pgid > 1
    assert rest == b"ran\n"
    assert done.returncode == 0


def test_home_relative_interpreter_is_expanded_on_the_host(tmp_path: Path) -> None:
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "python").symlink_to(sys.executable)
    env = {**os.environ, "HOME": str(tmp_path)}
    command = remote_command("~/venv/python", SCRIPT)  # as the remote login shell gets it
    done = subprocess.run(
        ["sh", "-c", command], input=SCRIPT, capture_output=True, env=env, timeout=30
    )
    assert done.stdout.endswith(b"ran\n"), done


def test_a_compressed_script_keeps_its_alarm_line_and_the_rest_whole() -> None:
    script = build_bundle(["system"]).script({}, deadline_s=30, parallel=4)
    packed = compressed_script(script)
    head, body = packed.split(b"\n", 1)
    assert head + b"\n" == script[: len(head) + 1]
    assert start_up_alarm(packed) == 30
    assert zlib.decompress(body) == script[len(head) + 1 :]
    assert len(packed) < len(script) / 2  # what srun then copies to every node
    with pytest.raises(ValueError, match="alarm"):
        compressed_script(b"print(1)\n")


def test_the_slurm_launcher_sets_the_alarm_before_site_then_runs_the_compressed_script(
    tmp_path: Path,
) -> None:
    # site imports sitecustomize: what it sees is what a hung site-packages mount would see
    (tmp_path / "sitecustomize.py").write_text(
        "import signal\nprint('site sees the alarm', signal.getitimer(signal.ITIMER_REAL)[0] > 0)\n"
    )
    script = with_alarm("import sys\nprint('ran', __name__, sys.argv[0])\n", 7)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, *ZLIB_LAUNCH_ARGS],
        input=compressed_script(script),
        capture_output=True,
        env=env,
        timeout=30,
    )
    assert done.stdout == b"site sees the alarm True\nran __main__ -c\n", done.stderr


def test_remote_command_quotes_every_word() -> None:
    words = shlex.split(remote_command("/opt/venv/bin/python", SCRIPT))
    assert words == launch_argv("/opt/venv/bin/python", SCRIPT)


def test_launch_report_reads_only_a_valid_first_line() -> None:
    seen: list[bytes] = []
    report = LaunchReport(lambda chunk: seen.append(chunk) or True)
    assert report(b'{"type":"launch",')
    assert report(b'"pgid":4242}\n{"type":"hello"}\n')
    assert report.pgid == 4242
    assert b"".join(seen).startswith(b'{"type":"launch"')
    for line in (b'{"type":"launch","pgid":1}', b'{"type":"launch","pgid":true}', b"garbage"):
        assert launch_pgid(line) is None


def test_end_group_command_names_only_the_group() -> None:
    assert "kill -TERM -4242" in end_group_command(4242)
    assert shlex.split(end_group_command(4242))[:2] == ["sh", "-c"]
