"""The host runner in parts: probes/runner/_host_runner.py and the modules it declares (RUNNER_MODULES)
stay small, travel in every bundle once, are covered by the bundle's digest, and load from the
runner's own folder when it is run by hand (issue 37)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.execution.bundle import (
    RUNNER_FILE,
    Bundle,
    ProbeFileError,
    ProbeSource,
    build_bundle,
    declared_literal,
)
from tests.conftest import REMOTE_PYTHON
from tests.runner.helpers import GOOD

PROBES = Path(__file__).resolve().parents[2] / "probes"
RUNNER = PROBES / "runner"
MAX_LINES = 600  # the project's bound on a module (tests/unit/test_layout.py for fleet/)
RUNNER_MODULES = [
    str(name)
    for name in declared_literal((RUNNER / RUNNER_FILE).read_text(), "RUNNER_MODULES") or ()
]


def script_payload(bundle: Bundle) -> dict[str, object]:
    line = bundle.script({}, 60, 4).decode().split("BUNDLE = json.loads(", 1)[1]
    payload: dict[str, object] = json.loads(json.loads(line.split(")\n", 1)[0]))
    return payload


def test_the_runner_declares_its_modules() -> None:
    assert RUNNER_MODULES, "the runner declares no RUNNER_MODULES literal"
    assert all(name.startswith("_runner_") and name.endswith(".py") for name in RUNNER_MODULES)


@pytest.mark.parametrize("file_name", [RUNNER_FILE, *RUNNER_MODULES])
def test_the_runner_and_each_of_its_modules_stay_within_600_lines(file_name: str) -> None:
    lines = len((RUNNER / file_name).read_text().splitlines())
    assert lines <= MAX_LINES, f"probes/{file_name} has {lines} lines: split it"


def test_every_bundle_carries_each_runner_module_once() -> None:
    bundle = build_bundle(["system"])
    payload = script_payload(bundle)
    expected = {name: (RUNNER / name).read_text() for name in RUNNER_MODULES}
    assert payload["runner_modules"] == expected
    script = bundle.script({}, 60, 4).decode()
    assert script.count("def child_main(") == 1  # in the BUNDLE literal, not in the runner too


def test_a_bundle_made_without_its_runner_modules_reads_them_from_fleets_probes() -> None:
    built = build_bundle(["system"])
    bare = Bundle(runner=built.runner, probes=built.probes)
    assert script_payload(bare)["runner_modules"] == script_payload(built)["runner_modules"]
    assert bare.sha256 == built.sha256


def test_the_bundle_digest_covers_the_runner_modules() -> None:
    built = build_bundle(["system"])
    modules = built.runner_module_texts()
    name = RUNNER_MODULES[-1]
    changed = dataclasses.replace(built, runner_modules={**modules, name: modules[name] + "#\n"})
    assert changed.sha256 != built.sha256


def test_a_helper_named_like_a_runner_module_is_refused() -> None:
    name = RUNNER_MODULES[0]
    probe = ProbeSource("mine", GOOD, "", {name: "X = 1\n"}, path="myprobes/mine.py")
    bundle = dataclasses.replace(build_bundle(["system"]), probes={"mine": probe})
    with pytest.raises(ProbeFileError, match=rf"myprobes/mine.py: ships {name}, the name of"):
        bundle.script({}, 60, 4)


def test_run_by_hand_the_runner_imports_its_modules_from_its_folder_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """`python3 probes/runner/_host_runner.py` in a probes folder of its own with one probe: its
    modules come from the runner's folder (sys.path[0]), and no __pycache__ is left there."""
    (tmp_path / "runner").mkdir()
    for file_name in [RUNNER_FILE, *RUNNER_MODULES]:
        shutil.copy(RUNNER / file_name, tmp_path / "runner" / file_name)
    (tmp_path / "good.py").write_text(GOOD)
    done = subprocess.run(
        [REMOTE_PYTHON, str(tmp_path / "runner" / RUNNER_FILE)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["type"] for line in lines] == ["hello", "probe", "done"]
    assert lines[1]["data"] == {"answer": 42}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.py", "runner"]
    assert sorted(p.name for p in (tmp_path / "runner").iterdir()) == sorted(
        [RUNNER_FILE, *RUNNER_MODULES]
    )
