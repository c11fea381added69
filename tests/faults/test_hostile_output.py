"""A remote side that floods, prints bytes that are not UTF-8, or forges broken protocol lines.

Each host's Python gets a `sitecustomize` on its PYTHONPATH (sshd SetEnv): code that runs in the
interpreter before our runner, as a hostile or broken host environment would.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import inventory_for, start_fleet, strictly_json
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults

CAP_MIB = 16  # fleet.execution.protocol.DEFAULT_OUTPUT_LIMIT
MARGIN_MIB = 40

FLOOD = """
import os
block = (b"x" * 4095 + b"\\n") * 256  # 1 MiB of lines
for _ in range(1024):  # 1 GiB
    os.write(1, block)
"""
FLOOD_ONE_LINE = """
import os
block = b"y" * (1 << 20)  # 1 GiB without a single newline
for _ in range(1024):
    os.write(1, block)
"""
NOT_UTF8 = """
import os
os.write(1, b"\\xff\\xfe\\x80\\xc3( not utf-8 \\xed\\xa0\\x80\\n\\x00\\x1b[31m\\n")
"""
BROKEN_JSON = """
import os
os.write(1, b'{"type": "probe", "name": "system", "ok": tr\\n')
os.write(1, b'{"type": "probe", "name": "forged", "status": "ok", "data": {"x": NaN}}\\n')
os.write(1, b'{"type": "hello", "python": Infinity}\\n[1, 2\\n{"type": 7}\\n')
_write = os.write

def write(fd, data):  # from now on, every result of the packages probe is cut in half
    raw = bytes(data)
    if fd == 1 and b'"type": "probe"' in raw and b'"name": "packages"' in raw:
        _write(fd, raw[: len(raw) // 2] + b"\\n")
        return len(raw)
    return _write(fd, data)

os.write = write
"""


def site_dir(tmp_path: Path, name: str, code: str) -> dict[str, str]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent(code))
    return {"PYTHONPATH": str(folder)}


def test_floods_non_utf8_and_broken_json_cost_only_their_host(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    good = fresh_host("good")
    flood = fresh_host("flood", site_dir(tmp_path, "flood", FLOOD))
    one_line = fresh_host("flood-line", site_dir(tmp_path, "flood-line", FLOOD_ONE_LINE))
    not_utf8 = fresh_host("not-utf8", site_dir(tmp_path, "not-utf8", NOT_UTF8))
    broken = fresh_host("broken-json", site_dir(tmp_path, "broken-json", BROKEN_JSON))
    names = [good, flood, one_line, not_utf8, broken]

    baseline_dir = tmp_path / "baseline"
    baseline_dir.mkdir()
    baseline = start_fleet(
        baseline_dir,
        "probe",
        "-i",
        str(inventory_for(farm, baseline_dir, [good])),
        "-p",
        "system,packages",
        watch_memory=True,
    )
    assert baseline.finish().status(good) == "ok"

    inventory = inventory_for(farm, tmp_path, names)
    controller = start_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system,packages", watch_memory=True
    )
    result = controller.finish()

    assert result.status(good) == "ok"
    for name in (flood, one_line):
        assert result.status(name) == "output_truncated", result.host(name)
        assert f"passed {CAP_MIB} MiB" in result.host(name)["error"]
    assert result.status(not_utf8) == "ok", result.host(not_utf8)
    assert result.status(broken) == "partial", result.host(broken)
    assert "packages" in result.host(broken)["error"]
    assert result.host(broken)["probes"]["system"]["status"] == "ok"
    assert "forged" not in result.host(broken)["probes"]  # no probe we did not send
    assert result.returncode == 8
    assert "Traceback" not in result.stdout + result.stderr

    # the run document is strict JSON (no NaN/Infinity a host slipped in), saved and written alike
    strictly_json((tmp_path / "run.json").read_text())
    for saved in (tmp_path / "state").rglob("runs/*.json"):
        strictly_json(saved.read_text())
    json.dumps(result.document, allow_nan=False)

    grown_mib = (controller.peak_rss_kib - baseline.peak_rss_kib) / 1024
    assert baseline.peak_rss_kib > 0
    assert controller.peak_rss_kib > 0
    assert grown_mib < CAP_MIB + MARGIN_MIB, (
        f"controller peak {controller.peak_rss_kib} KiB vs {baseline.peak_rss_kib} KiB baseline"
    )
