"""The nccl probe: parsers on golden files, and the probe run by hand in a controlled env."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REMOTE_PYTHON
from tests.probes.handrun import BY_HAND, load_probe
from tests.probes.ships import helpers_imported

nccl = load_probe("nccl")
REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "nccl"
PROBE = REPO / "probes" / "nccl.py"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "expected.json").is_file())
PARSERS = {"ldconfig_-p.txt": nccl.parse_ldconfig, "nccl.conf": nccl.parse_nccl_conf}
CANARY = "hf_CANARYnccl0123456789abcdefghij"


@pytest.mark.parametrize("case", CASES)
def test_golden_case(case: str) -> None:
    folder = GOLDEN / case
    expected = json.loads((folder / "expected.json").read_text())
    parsed = {
        path.name: PARSERS[path.name](path.read_text())
        for path in sorted(folder.iterdir())
        if path.name in PARSERS
    }
    assert parsed == expected["files"]
    assert (folder / "SOURCE.md").is_file()


def test_ships_every_helper_it_imports() -> None:
    """On a host a helper is importable only when SHIPS lists it; nccl.conf is read by the one
    parser the net probe uses too."""
    assert set(nccl.SHIPS) == helpers_imported("nccl") == {"_nccl_conf.py", "_ldconfig.py"}


def test_environment_keeps_only_nccl_variables() -> None:
    environ = {"NCCL_P2P_DISABLE": "1", "HF_TOKEN": CANARY, "NCCLX": "no", "PATH": "/bin"}
    assert nccl.nccl_environment(environ) == {"NCCL_P2P_DISABLE": "1"}


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("/usr/lib/x86_64-linux-gnu/libnccl.so.2.27.3", "2.27.3"),
        ("/usr/lib/x86_64-linux-gnu/libnccl.so.2", None),
        ("libnccl.so", None),
        ("libnccl-net.so", None),
    ],
)
def test_version_from_filename(name: str, version: str | None) -> None:
    assert nccl.version_from_filename(name) == version


@pytest.mark.parametrize(
    ("reported", "version"),
    [
        ((2, 27, 3), "2.27.3"),
        ([2, 21, 5], "2.21.5"),
        (22703, "2.27.3"),
        (2708, "2.7.8"),
        (None, None),
    ],
)
def test_torch_nccl_version_forms(reported: object, version: str | None) -> None:
    assert nccl.torch_nccl_version(reported) == version


def test_binary_version_across_a_chunk_boundary(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(nccl, "BINARY_SCAN_CHUNK", 64)
    library = tmp_path / "libnccl.so.2"
    library.write_bytes(b"\0" * 50 + b"NCCL version 2.27.3+cuda12.9\0" + b"\x7fELF" * 40)
    assert nccl.binary_version(str(library)) == "2.27.3+cuda12.9"


def test_binary_version_absent_or_unreadable(tmp_path: Path) -> None:
    library = tmp_path / "libnccl.so.2"
    library.write_bytes(b"\0" * 1000)
    assert nccl.binary_version(str(library)) is None
    assert nccl.binary_version(str(tmp_path / "missing.so")) is None


def test_conf_paths_follow_nccl_conf_file() -> None:
    assert nccl.conf_file_paths({"NCCL_CONF_FILE": "/opt/n.conf"}) == [
        ("/opt/n.conf", "/opt/n.conf"),
        ("/etc/nccl.conf", "/etc/nccl.conf"),
    ]
    labels = [label for label, _ in nccl.conf_file_paths({})]
    assert labels == ["~/.nccl.conf", "/etc/nccl.conf"]


# ---------------------------------------------------------------- the probe as a process


def stub_site(root: Path) -> Path:
    """A PYTHONPATH holding a pip-style libnccl and a stub torch that reports NCCL 2.27.3."""
    lib_dir = root / "nvidia" / "nccl" / "lib"
    lib_dir.mkdir(parents=True)
    (lib_dir / "libnccl.so.2").write_bytes(b"\x7fELF\0junk\0NCCL version 2.27.3+cuda12.9\0tail")
    torch = root / "torch"
    (torch / "cuda").mkdir(parents=True)
    (torch / "__init__.py").write_text("__version__ = '2.11.0+stub'\nfrom . import cuda\n")
    (torch / "cuda" / "__init__.py").write_text("from . import nccl\n")
    (torch / "cuda" / "nccl.py").write_text("def version():\n    return (2, 27, 3)\n")
    return root


def run_probe(env: dict, options: str = "{}", cwd: Path = REPO) -> dict:
    completed = subprocess.run(
        [REMOTE_PYTHON, str(BY_HAND), "nccl", options],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert CANARY not in completed.stdout + completed.stderr
    return json.loads(completed.stdout)


def test_probe_in_a_controlled_environment(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("# test\nNCCL_P2P_LEVEL=NVL\nNCCL_DEBUG = INFO\n")
    site = stub_site(tmp_path / "site")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(site),
        "NCCL_P2P_DISABLE": "1",
        "NCCL_CONF_FILE": str(conf),
        "HF_TOKEN": CANARY,
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    result = run_probe(env)
    data = result["data"]
    assert result["ok"] is True
    assert result["error"] is None
    assert data["env"] == {"NCCL_CONF_FILE": str(conf), "NCCL_P2P_DISABLE": "1"}
    assert data["conf_files"][str(conf)] == {"NCCL_P2P_LEVEL": "NVL", "NCCL_DEBUG": "INFO"}
    assert data["torch_nccl_version"] == "2.27.3"
    assert data["torch_error"] is None
    (wheel,) = [lib for lib in data["libraries"] if lib["path"].startswith(str(site))]
    assert wheel["version"] == "2.27.3"
    assert wheel["version_source"] == "binary"
    assert wheel["version_string"] == "2.27.3+cuda12.9"
    assert wheel["source"] == "site-packages"


def test_probe_never_imports_probes_torch(tmp_path: Path) -> None:
    # Run from inside probes/: probes/torch.py (another probe) must never be taken for torch.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    env["PYTHONPATH"] = str(stub_site(tmp_path / "site"))
    result = run_probe(env, cwd=REPO / "probes")
    assert result["data"]["torch_nccl_version"] == "2.27.3"


def test_probe_without_any_nccl(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    result = run_probe(env, options='{"torch": false}')
    data = result["data"]
    assert data["env"] == {}
    assert data["torch_nccl_version"] is None
    if not data["libraries"]:  # the test machine itself may carry a libnccl
        assert result == {**result, "ok": False, "error": "no NCCL library found"}


def test_probe_reports_a_broken_torch(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise RuntimeError('CUDA driver too old')\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    env["PYTHONPATH"] = str(site)
    data = run_probe(env)["data"]
    assert data["torch_nccl_version"] is None
    assert data["torch_error"] == "RuntimeError: CUDA driver too old"
