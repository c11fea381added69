"""The `torch` probe: the arch judgement (pure), facts from a fake, stubs, and real CPU torch."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import remote_has
from tests.probes import handrun
from tests.probes.handrun import load_probe
from tests.recorded import CONTRACT

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "probes" / "torch.py"
STUBS = REPO / "tests" / "fakes" / "stubs"


probe = load_probe("torch")


def run_by_hand(options=None, pythonpath=None, cwd=None):
    return handrun.run_by_hand("torch", options, pythonpath, cwd)


@pytest.mark.parametrize(
    ("text", "kind", "capability", "suffix"),
    [
        ("sm_90", "sm", (9, 0), ""),
        ("sm_90a", "sm", (9, 0), "a"),
        ("sm_120f", "sm", (12, 0), "f"),
        ("sm_103", "sm", (10, 3), ""),
        ("compute_120", "compute", (12, 0), ""),
    ],
)
def test_parse_arch_entry(text, kind, capability, suffix):
    assert probe.parse_arch_entry(text) == probe.ArchEntry(text, kind, capability, suffix)


@pytest.mark.parametrize("text", ["", "sm_", "sm_9", "gfx90a", "sm_90ab", "SM_90"])
def test_parse_arch_entry_ignores_other_text(text):
    assert probe.parse_arch_entry(text) is None


BLACKWELL_NOARCH = ["sm_80", "sm_86", "sm_90"]


@pytest.mark.parametrize(
    ("arch_list", "device", "supported", "ptx", "matched"),
    [
        (BLACKWELL_NOARCH, (12, 0), False, False, None),  # the SM120 failure
        ([*BLACKWELL_NOARCH, "sm_120"], (12, 0), True, False, "sm_120"),
        (["sm_100", "sm_120a"], (12, 0), True, False, "sm_120a"),
        (["sm_120a"], (12, 1), False, False, None),  # arch-specific code runs on that arch only
        (["sm_120f"], (12, 1), True, False, "sm_120f"),  # family code runs across the family
        (["sm_100"], (12, 0), False, False, None),  # no compatibility across majors
        (["sm_80"], (8, 6), True, False, "sm_80"),  # later minor of the same major
        (["sm_80", "sm_86"], (8, 6), True, False, "sm_86"),  # the exact entry is named
        (["sm_86"], (8, 0), False, False, None),  # not an earlier minor
        (["sm_90a"], (9, 0), True, False, "sm_90a"),
        (["sm_80", "compute_90"], (12, 0), False, True, None),  # PTX JITs forward
        (["compute_90a"], (12, 0), False, False, None),  # arch-specific PTX does not
        (["compute_120"], (9, 0), False, False, None),  # PTX never JITs backward
        (["sm_90", "compute_90"], (9, 0), True, True, "sm_90"),
        ([], (9, 0), False, False, None),
        (["garbage", "sm_90"], (9, 0), True, False, "sm_90"),
    ],
)
def test_judge_arch(arch_list, device, supported, ptx, matched):
    assert probe.judge_arch(arch_list, device) == probe.ArchJudgement(supported, ptx, matched)


def test_version_text():
    assert probe.version_text((2, 26, 2)) == "2.26.2"
    assert probe.version_text(2026) == "2026"
    assert probe.version_text(None) is None


def fake_torch(raising=()):
    def maybe_raise(name, value):
        def call(*args):
            if name in raising:
                raise RuntimeError(name + " exploded")
            return value(*args) if callable(value) else value

        return call

    cuda = SimpleNamespace(
        is_available=maybe_raise("is_available", True),
        device_count=maybe_raise("device_count", 2),
        get_arch_list=maybe_raise("get_arch_list", ["sm_90"]),
        get_device_capability=maybe_raise("cap", lambda i: (9, 0)),
        get_device_name=maybe_raise("name", lambda i: "NVIDIA H200"),
        can_device_access_peer=maybe_raise("p2p", lambda a, b: True),
        nccl=SimpleNamespace(version=maybe_raise("nccl", (2, 28, 9))),
    )
    return SimpleNamespace(
        __version__="9.9.9",
        cuda=cuda,
        version=SimpleNamespace(cuda="13.0"),
        backends=SimpleNamespace(cudnn=SimpleNamespace(version=lambda: 91300)),
    )


@pytest.fixture
def fake_symmetric_memory(monkeypatch):
    """facts_from_torch imports torch.distributed._symmetric_memory by name: without this, a fake
    torch's facts would come from the real torch where one is installed, and that first import of
    the real torch, under warnings-as-errors, could fail halfway and break every later import."""
    module = SimpleNamespace(_SymmetricMemory=object, is_nvshmem_available=lambda: True)
    monkeypatch.setitem(sys.modules, "torch.distributed._symmetric_memory", module)


def test_facts_from_a_fake_torch(fake_symmetric_memory):
    data = probe.facts_from_torch(fake_torch())
    assert data["version"] == "9.9.9"
    assert data["nccl_version"] == "2.28.9"
    assert data["devices"][1] == {
        "index": 1,
        "name": "NVIDIA H200",
        "capability": "9.0",
        "arch_supported": True,
        "ptx_fallback": False,
        "arch_matched": "sm_90",
    }
    assert data["p2p_access"] == {"0": {"1": True}, "1": {"0": True}}
    assert data["symmetric_memory"] == {
        "module_importable": True,
        "class_name": "_SymmetricMemory",
        "nvshmem_available": True,
    }


def test_a_failing_query_is_recorded_not_raised(fake_symmetric_memory):
    data = probe.facts_from_torch(fake_torch(raising={"p2p", "nccl", "cap"}))
    assert data["nccl_version"] is None
    assert data["p2p_access"]["0"]["1"] is None
    assert data["devices"][0]["capability"] is None
    assert data["query_errors"]["nccl"] == "RuntimeError: nccl exploded"
    assert set(data["query_errors"]) >= {"p2p_0_1", "device_0"}


def test_without_torch_the_probe_reports_a_fact(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    result = probe.collect({})
    assert result["ok"] is False
    assert result["error"].startswith("torch not importable: ModuleNotFoundError")


def test_by_hand_never_imports_itself_as_torch(tmp_path):
    # sys.path[0] is probes/ when run by hand: `import torch` must not find probes/torch.py.
    data = run_by_hand(cwd=REPO / "probes")
    if not remote_has("torch"):
        assert data["ok"] is False
        assert "No module named 'torch'" in data["error"]
    else:
        assert data["ok"] is True
        assert set(data["data"]) >= CONTRACT["torch"]  # the fields the real H200 run has


@pytest.mark.torch
def test_real_cpu_torch():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this test describes a machine without CUDA")
    data = probe.collect({})["data"]
    assert data["version"] == str(torch.__version__)
    assert data["cuda_available"] is False
    assert data["devices"] == []
    assert data["p2p_access"] == {}
    assert data["symmetric_memory"]["module_importable"] is True
    assert data["symmetric_memory"]["class_name"] in ("SymmetricMemory", "_SymmetricMemory")


def test_stub_sm120_without_sm_120_in_its_arch_list():
    data = run_by_hand(pythonpath=STUBS / "torch_sm120_noarch")["data"]
    assert data["version"] == "2.7.0+cu126"
    assert data["nccl_version"] == "2.26.2"
    assert data["arch_list"] == ["sm_80", "sm_86", "sm_90"]
    assert data["cuda_available"] is True
    assert data["device_count"] == 8
    assert len(data["devices"]) == 8
    for device in data["devices"]:
        assert device["capability"] == "12.0"
        assert device["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        assert device["arch_supported"] is False
        assert device["ptx_fallback"] is False
    assert data["symmetric_memory"]["class_name"] == "_SymmetricMemory"
    assert data["p2p_access"]["0"]["7"] is False


def test_stub_sm120_with_sm_120():
    data = run_by_hand(pythonpath=STUBS / "torch_sm120_ok")["data"]
    assert data["version"] == "2.9.0+cu128"
    assert all(d["arch_supported"] is True for d in data["devices"])
    assert data["symmetric_memory"]["class_name"] == "SymmetricMemory"


def test_stub_h200_mirrors_the_real_capture():
    data = run_by_hand(pythonpath=STUBS / "torch_h200")["data"]
    assert data["version"] == "2.11.0+cu130"
    assert data["cuda"] == "13.0"
    assert data["nccl_version"] == "2.28.9"
    assert [d["capability"] for d in data["devices"]] == ["9.0", "9.0"]
    assert all(d["arch_supported"] for d in data["devices"])
    assert data["p2p_access"] == {"0": {"1": True}, "1": {"0": True}}
    assert data["symmetric_memory"] == {
        "module_importable": True,
        "class_name": "_SymmetricMemory",
        "nvshmem_available": True,
    }
