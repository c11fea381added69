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


def setuptools_version() -> tuple[int, int]:
    """The installed setuptools' (major, minor) ((0, 0): none)."""
    if importlib.util.find_spec("setuptools") is None:
        return (0, 0)
    major, minor = importlib.metadata.version("setuptools").split(".")[:2]
    return (int(major), int(minor))


def can_build_a_wheel() -> bool:
    """setuptools>=64 (pyproject's), with bdist_wheel: built in from 70.1, else the wheel package.
    (A venv seeded without torch may have setuptools 65 and no wheel; torch pulls in a newer one.)"""
    version = setuptools_version()
    return version >= (70, 1) or (
        version >= (64, 0) and importlib.util.find_spec("wheel") is not None
    )


@pytest.mark.skipif(
    not can_build_a_wheel(), reason="building the wheel needs setuptools>=64 and bdist_wheel"
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
    assert "fleet/_probes/runner/_host_runner.py" in names
    assert "fleet/_probes/runner/_runner_secrets.py" in names  # the controller masks with it too
    # every folder of probes/ ships: the fabric rank, each family's helpers, the by-hand runner
    assert "fleet/_probes/fabric/_fabric_rank.py" in names
    assert "fleet/_probes/helpers/shared/_worker_io.py" in names
    assert "fleet/_probes/helpers/allreduce/_allreduce_worker.py" in names
    assert "fleet/_probes/runner/_by_hand.py" in names
    assert "fleet/api/probing.py" in names
    assert "fleet/_probes/gpu.py" in names
    assert "fleet/checks/packs/inference.yaml" in names
    assert {f"fleet/schemas/{kind}.schema.json" for kind in KINDS} <= set(names)


def test_every_package_of_fleet_is_listed_for_the_wheel() -> None:
    """pyproject.toml lists fleet's packages by name (probes/ ships as fleet._probes): a new
    sub-package left out of the list would be missing from every installed copy."""
    import re

    block = re.search(r"(?ms)^packages = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text())
    assert block is not None
    listed = set(re.findall(r'"([a-z_.]+)"', block.group(1)))
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "fleet").rglob("__init__.py")
    }
    assert found - listed == set()
