"""The wheel: probes ship under fleet's own name, never as a top-level `probes` package; the
package data (rule packs, JSON Schemas) ships with it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fleet.schemas import KINDS
from tests.conftest import ROOT


def setuptools_major() -> int:
    """The installed setuptools' major version (0: none); the build needs what pyproject asks."""
    if importlib.util.find_spec("setuptools") is None:
        return 0
    return int(importlib.metadata.version("setuptools").split(".")[0])


@pytest.mark.skipif(
    setuptools_major() < 64, reason="building the wheel needs setuptools>=64 (pyproject's)"
)
def test_wheel_ships_probes_as_fleet_probes_not_top_level(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("fleet-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {
        "fleet",
        wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info",
    }
    assert "fleet/_probes/_host_runner.py" in names
    assert "fleet/_probes/gpu.py" in names
    assert "fleet/checks/packs/inference.yaml" in names
    assert {f"fleet/schemas/{kind}.schema.json" for kind in KINDS} <= set(names)
