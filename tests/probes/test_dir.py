"""The `dir` probe: sorted names and digests of modules and torch.ops namespaces."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest

from tests.probes import handrun
from tests.probes.handrun import load_probe

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "probes" / "dir.py"
STUBS = REPO / "tests" / "fakes" / "stubs"
SYMM = "torch.distributed._symmetric_memory"


probe = load_probe("dir")


def run_by_hand(options=None, pythonpath=None, cwd=None):
    return handrun.run_by_hand("dir", options, pythonpath, cwd)


def test_digest_is_sha256_of_the_names_joined_by_newlines():
    names = ["a", "b", "c"]
    assert probe.names_digest(names) == hashlib.sha256(b"a\nb\nc").hexdigest()


def test_op_names_fold_overloads_and_keep_only_the_namespace():
    all_ops = [
        "sgl_kernel::rmsnorm",
        "sgl_kernel::fused_add_rmsnorm.out",
        "sgl_kernel::rmsnorm.out",
        "aten::add.Tensor",
        "sgl_kernel_extra::x",
    ]
    assert probe.op_names_in_namespace(all_ops, "sgl_kernel") == ["fused_add_rmsnorm", "rmsnorm"]
    assert probe.op_names_in_namespace(all_ops, "_C") == []


def test_dir_of_an_importable_module():
    result = probe.dir_of("json")
    assert result["error"] is None
    assert result["names"] == sorted(dir(__import__("json")))
    assert result["sha256"] == probe.names_digest(result["names"])
    assert result["count"] == len(result["names"])


def test_dir_of_a_missing_module_is_an_error_entry():
    result = probe.dir_of("no_such_module_fleet")
    assert result == {
        "names": [],
        "count": 0,
        "sha256": None,
        "error": "ModuleNotFoundError: No module named 'no_such_module_fleet'",
    }


def test_op_namespace_without_torch_is_an_error_entry(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    result = probe.dir_of("torch.ops.sgl_kernel")
    assert result["names"] == []
    assert result["error"].startswith("ModuleNotFoundError")


@pytest.mark.parametrize("modules", [3, [None], {"x": 1}])
def test_bad_options_are_a_clear_error(modules):
    result = probe.collect({"modules": modules})
    assert result["ok"] is False
    assert "modules" in result["error"]


def test_by_hand_default_modules_shape():
    data = run_by_hand()
    assert data["ok"] is True
    modules = data["data"]["modules"]
    assert set(modules) == set(probe.DEFAULT_MODULES)
    for entry in modules.values():
        assert set(entry) >= {"names", "sha256", "error"}
        assert entry["names"] == sorted(entry["names"])
        assert (entry["error"] is None) == (entry["sha256"] is not None)


@pytest.mark.parametrize(
    ("stub", "has_public"),
    [("torch_sm120_noarch", False), ("torch_sm120_ok", True), ("torch_h200", False)],
)
def test_against_stub_torch(stub, has_public):
    modules = run_by_hand({"modules": [SYMM, "torch.ops._C"]}, pythonpath=STUBS / stub)["data"][
        "modules"
    ]
    names = modules[SYMM]["names"]
    assert "_SymmetricMemory" in names
    assert ("SymmetricMemory" in names) is has_public
    assert modules["torch.ops._C"]["error"]  # a stub registers no ops


@pytest.mark.torch
def test_real_torch_distributed_and_op_namespaces():
    pytest.importorskip("torch")
    result = probe.collect(
        {"modules": ["torch.distributed", "torch.ops.aten", "torch.ops.sgl_kernel"]}
    )["data"]["modules"]
    assert {"all_reduce", "init_process_group"} <= set(result["torch.distributed"]["names"])
    assert "add" in result["torch.ops.aten"]["names"]
    if importlib.util.find_spec("sgl_kernel") is None:
        error = result["torch.ops.sgl_kernel"]["error"]
        assert error.startswith("LookupError: no operators registered in torch.ops.sgl_kernel")
        assert "importing sgl_kernel failed" in error
