"""asyncssh imported without a compiler (fleet/transport/asyncssh_import.py): its library lookups
read the loader's cache and LD_LIBRARY_PATH, and never run gcc or ld."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.transport.asyncssh_import import in_library_path, loader_lookups
from tests.conftest import ROOT

LINUX = sys.platform.startswith("linux")


def spy_tools(folder: Path, marker: Path) -> dict[str, str]:
    """An environment whose `gcc`, `cc` and `ld` only note that they ran (and find nothing)."""
    for tool in ("gcc", "cc", "ld"):
        spy = folder / tool
        spy.write_text(f"#!/bin/sh\necho {tool} >> {marker}\nexit 1\n")
        spy.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.skipif(not LINUX, reason="find_library runs gcc and ld on Linux only")
def test_importing_asyncssh_runs_no_compiler(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    env = spy_tools(tmp_path, marker)
    plain = "import ctypes.util; ctypes.util.find_library('fleet-no-such-lib')"
    subprocess.run([sys.executable, "-c", plain], env=env, check=True)
    assert marker.exists(), "the spies catch a plain find_library (the control)"
    marker.unlink()
    ours = "from fleet.transport.asyncssh_import import asyncssh; print(asyncssh.__name__)"
    done = subprocess.run(
        [sys.executable, "-c", ours], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "asyncssh"
    assert not marker.exists(), marker.read_text()


@pytest.mark.skipif(not LINUX, reason="the loader's cache is Linux's")
def test_a_library_in_the_loader_cache_is_found_as_before() -> None:
    before = ctypes.util.find_library("c")
    with loader_lookups():
        during = ctypes.util.find_library("c")
    assert during is not None
    assert during == before
    assert ctypes.util.find_library.__name__ == "find_library"
    assert ctypes.util.find_library.__module__ == "ctypes.util", "the standard one is back"


def test_library_path_folders_are_searched_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (second / "libfleetdemo.so.3").write_bytes(b"")
    missing = tmp_path / "missing"
    path = os.pathsep.join([str(missing), str(first), str(second)])
    assert in_library_path("fleetdemo", path) == str(second / "libfleetdemo.so.3")
    (first / "libfleetdemo.so").write_bytes(b"")
    assert in_library_path("fleetdemo", path) == str(first / "libfleetdemo.so")
    assert in_library_path("otherdemo", path) is None
    assert in_library_path("fleetdemo", "") is None
