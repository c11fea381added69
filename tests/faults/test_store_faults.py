"""The runs folder under stress: two runs at once, a full disk, a careless umask."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import inventory_for, start_fleet, strictly_json
from tests.integration.conftest import run_fleet
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults


def test_two_runs_at_once_on_one_runs_folder_are_both_saved(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    name = fresh_host("concurrent")
    state = tmp_path / "shared-state"
    controllers = []
    for index in range(2):
        own = tmp_path / f"run-{index}"
        own.mkdir()
        inventory = inventory_for(farm, own, [name])
        controllers.append(
            start_fleet(
                own, "probe", "-i", str(inventory), "-p", "system",
                env={"XDG_STATE_HOME": str(state)},
            )
        )  # fmt: skip
    results = [c.finish(60) for c in controllers]

    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    saved = sorted((state / "fleet" / "runs").iterdir())
    assert [p.name for p in saved if p.name.startswith(".")] == []
    assert len(saved) == 2, saved
    documents = [strictly_json(p.read_text()) for p in saved]
    assert {d["started"] for d in documents} == {r.document["started"] for r in results}
    assert all(d["hosts"][name]["status"] == "ok" for d in documents)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A tiny tmpfs, mounted for the test and filled up (needs root: CI is)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs as root and must mount a tmpfs: {done.stderr!r}")
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> None:
    with contextlib.suppress(OSError), (folder / "filler").open("wb") as handle:
        while True:
            handle.write(b"\0" * 4096)
            handle.flush()


def test_full_disk_is_a_clear_error_and_earlier_runs_stay(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any, full_disk: Path
) -> None:
    name = fresh_host("fulldisk")
    runs = full_disk / "runs"
    inventory = inventory_for(farm, tmp_path, [name])
    first = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "--runs-dir", str(runs)
    )
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in runs.iterdir()}
    fill(full_disk)
    shutil.copy(tmp_path / "run.json", tmp_path / "first.json")

    second = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "--runs-dir", str(runs)
    )

    assert "error: cannot save the run in" in second.stderr
    assert "No space left on device" in second.stderr
    assert "hint:" in second.stderr
    assert "Traceback" not in second.stderr
    assert second.status(name) == "ok"  # the run itself is still shown and written with --json
    assert second.returncode == 64  # a script must learn that this run was not kept
    assert {p.name: p.read_bytes() for p in runs.iterdir()} == before  # nothing half-written


def test_umask_000_still_gives_private_runs_and_folders(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    unknown = fresh_host("umask")
    inventory = inventory_for(farm, tmp_path, [])
    (tmp_path / "inv.yaml").write_text(
        inventory.read_text().replace("hosts: {}", "hosts:\n  "
        f"{unknown}: {{address: {farm.hosts[unknown].address}, port: {farm.hosts[unknown].port}}}")
    )  # fmt: skip
    old = os.umask(0)
    try:
        result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--accept-new")
    finally:
        os.umask(old)
    assert result.status(unknown) == "ok", result.stdout
    state = result.state_dir
    for folder in (state, state / "fleet", state / "fleet" / "runs"):
        assert oct(folder.stat().st_mode & 0o777) == "0o700", folder
    saved = list((state / "fleet" / "runs").iterdir())
    assert saved, "no run saved"
    files = [*saved, state / "fleet" / "known_hosts"]
    files.append(tmp_path / "run.json")
    for path in files:
        assert oct(path.stat().st_mode & 0o777) == "0o600", path
