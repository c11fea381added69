"""No Python at the configured path, or only Python 2: `no_python` saying what was tried, no
traceback dump."""

from __future__ import annotations

import glob
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import inventory_for
from tests.integration.conftest import run_fleet, ssh_host
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults

# What `python2.7 -` says to Python 3 source, for machines that have no Python 2 at all.
PYTHON2_STAND_IN = """\
#!/bin/sh
# Stand-in for a host's Python 2.7 (none installed here): reads the script, rejects its syntax.
cat >/dev/null
echo '  File "<stdin>", line 60' >&2
echo '    raise ChannelClosed() from None' >&2
echo '                             ^' >&2
echo 'SyntaxError: invalid syntax' >&2
exit 1
"""


def python2(tmp_path: Path) -> str:
    """A real Python 2 if this machine has one, else a faithful stand-in."""
    candidates = [shutil.which("python2.7"), *glob.glob("/root/.pyenv/versions/2.7*/bin/python2.7")]
    for candidate in candidates:
        if candidate and "shims" not in candidate:
            return candidate
    stand_in = tmp_path / "python2.7"
    stand_in.write_text(PYTHON2_STAND_IN)
    stand_in.chmod(0o755)
    return str(stand_in)


def test_missing_interpreter_and_python2_only_are_no_python(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    bin_dir = tmp_path / "py2-only-bin"  # a PATH where `python` is Python 2 and nothing else
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(python2(tmp_path))
    missing = fresh_host("no-python")
    old = fresh_host("python2-only", {"PATH": f"{bin_dir}:/usr/bin:/bin"})
    inventory = inventory_for(
        farm,
        tmp_path,
        [],
        {
            missing: ssh_host(farm, missing, python="/opt/missing/bin/python3"),
            old: ssh_host(farm, old, python="python"),
        },
    )
    farm.known_hosts(tmp_path / "known_hosts", [missing, old])

    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "-t", "20")

    assert result.returncode == 4, result.stderr
    assert result.status(missing) == "no_python"
    assert "/opt/missing/bin/python3" in result.host(missing)["error"]
    assert result.status(old) == "no_python", result.host(old)
    error = result.host(old)["error"]
    assert "python" in error
    assert "3.8" in error
    assert "SyntaxError" in error
    assert result.host(old)["hint"]
    everything = result.stdout + result.stderr + str(result.document)
    assert "Traceback" not in everything
    assert 'File "<stdin>"' not in everything
    assert textwrap.shorten(error, 300) == error  # one line, not a dump
