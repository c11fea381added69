"""The `imports` probe: spec parsing, fallbacks, versions, bounded errors, stubs and real torch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.probes import handrun
from tests.probes.handrun import load_helper, load_probe

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "probes" / "imports.py"
STUBS = REPO / "tests" / "fakes" / "stubs"
SYMM = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"


probe = load_probe("imports")
bounding = load_helper("_bounded_text")


def run_by_hand(options=None, pythonpath=None, cwd=None):
    return handrun.run_by_hand("imports", options, pythonpath, cwd)


@pytest.mark.parametrize(
    ("text", "modules", "names"),
    [
        ("torch", ["torch"], []),
        ("vllm._custom_ops", ["vllm._custom_ops"], []),
        ("flashinfer|flashinfer_python", ["flashinfer", "flashinfer_python"], []),
        (SYMM, ["torch.distributed._symmetric_memory"], ["SymmetricMemory", "_SymmetricMemory"]),
        (" os:path ", ["os"], ["path"]),
    ],
)
def test_parse_spec_accepts_both_forms(text, modules, names):
    assert probe.parse_spec(text) == probe.ImportSpec(modules, names)


@pytest.mark.parametrize(
    "text", ["", "   ", "os:", "os:|path", "a..b", "a|", "1abc", "os:path.join", "a:b:c", "a b"]
)
def test_parse_spec_rejects_invalid_specs(text):
    with pytest.raises(ValueError, match=r"."):  # any reason, but a reason
        probe.parse_spec(text)


def test_invalid_spec_is_reported_in_its_own_result_not_raised():
    result = probe.collect({"specs": ["json", "bad spec!", "os:"]})
    assert result["ok"] is True
    results = result["data"]["results"]
    assert results["json"]["resolved"] == "json"
    for bad in ("bad spec!", "os:"):
        assert results[bad]["resolved"] is None
        assert results[bad]["error"].startswith("invalid spec")


def test_class_fallback_records_the_failed_name():
    result = probe.probe_spec("os:NoSuchThing|path")
    assert result["resolved"] == "os:path"
    [tried] = result["tried"]
    assert tried["target"] == "os:NoSuchThing"
    assert tried["error"].startswith("ImportError: cannot import name 'NoSuchThing' from 'os'")


def test_module_fallback_and_total_failure():
    assert probe.probe_spec("no_such_mod_fleet|json")["resolved"] == "json"
    result = probe.probe_spec("no_such_mod_fleet|no_such_either_fleet")
    assert result["resolved"] is None
    assert [t["target"] for t in result["tried"]] == ["no_such_mod_fleet", "no_such_either_fleet"]
    assert all(t["error"].startswith("ModuleNotFoundError:") for t in result["tried"])
    assert result["version"] is None


def test_name_may_be_a_submodule_like_from_import():
    assert probe.probe_spec("xml:dom")["resolved"] == "xml:dom"


def test_version_comes_from_the_top_level_distribution(tmp_path, monkeypatch):
    assert probe.probe_spec("_pytest.config")["version"] == pytest.__version__
    assert probe.probe_spec("json")["version"] == __import__("json").__version__
    (tmp_path / "fleet_unversioned_mod.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert probe.probe_spec("fleet_unversioned_mod")["version"] is None


def test_module_to_distribution_map_matches_the_standard_librarys(tmp_path):
    """Our stat()-free map equals importlib.metadata.packages_distributions() (3.10+), for this
    interpreter's site-packages plus a wheel-style and a top_level.txt-style distribution."""
    metadata = pytest.importorskip("importlib.metadata")
    if not hasattr(metadata, "packages_distributions"):
        pytest.skip("packages_distributions is Python 3.10+")
    wheel = tmp_path / "demo_wheel-1.0.dist-info"
    wheel.mkdir()
    (wheel / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo-wheel\nVersion: 1.0\n\nName: x\n"
    )
    (wheel / "RECORD").write_text(
        "demo_pkg/__init__.py,,\ndemo_mod.py,,\n__pycache__/demo_mod.cpython-311.pyc,,\n"
        "demo_pkg.libs/libx.so,,\ndemo_wheel-1.0.dist-info/RECORD,,\n")  # fmt: skip
    for listed in (
        "demo_pkg/__init__.py",
        "demo_mod.py",
        "__pycache__/demo_mod.cpython-311.pyc",
        "demo_pkg.libs/libx.so",
    ):  # Python 3.12 skips files that do not exist
        (tmp_path / listed).parent.mkdir(exist_ok=True)
        (tmp_path / listed).write_text("")
    egg = tmp_path / "demo_egg-2.0.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: Demo-Egg\nVersion: 2.0\n")
    (egg / "top_level.txt").write_text("demo_egg\n")
    sys.path.insert(0, str(tmp_path))
    try:
        probe._packages_distributions.cache_clear()
        ours = probe._packages_distributions()
        theirs = metadata.packages_distributions()
    finally:
        sys.path.remove(str(tmp_path))
        probe._packages_distributions.cache_clear()
    assert ours["demo_pkg"] == ["demo-wheel"]
    assert ours["demo_mod"] == ["demo-wheel"]
    assert ours["demo_egg"] == ["Demo-Egg"]
    assert {k: sorted(set(v)) for k, v in ours.items()} == {
        k: sorted(set(v)) for k, v in theirs.items()
    }


def test_bound_text_keeps_the_last_line_of_a_long_message():
    """The shipped helper torch, dir and imports bound their errors with (_bounded_text.py)."""
    text = "boom\n" + "x" * 2000 + "\nthe real cause"
    bounded = bounding.bound_text(text, 500)
    assert len(bounded) <= 500
    assert bounded.startswith("boom")
    assert bounded.endswith("the real cause")
    single = bounding.bound_text("y" * 2000, 500)
    assert len(single) == 500
    assert single.endswith("…")
    assert bounding.bound_text("short") == "short"


def test_an_import_that_raises_a_huge_error_is_bounded(tmp_path, monkeypatch):
    (tmp_path / "fleet_noisy_mod.py").write_text(
        "print('BANNER on stdout')\nraise RuntimeError('x' * 5000 + '\\nlibfoo.so: missing')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    [tried] = probe.probe_spec("fleet_noisy_mod")["tried"]
    assert len(tried["error"]) <= bounding.MAX_ERROR_CHARS
    assert tried["error"].startswith("RuntimeError: xxx")
    assert tried["error"].endswith("libfoo.so: missing")


def test_banner_printed_at_import_stays_out_of_the_json(tmp_path):
    (tmp_path / "fleet_chatty_mod.py").write_text(
        "print('HELLO FROM IMPORT')\n__version__ = '1.2'\n"
    )
    data = run_by_hand({"specs": ["fleet_chatty_mod"]}, pythonpath=tmp_path)
    assert data["data"]["results"]["fleet_chatty_mod"] == {
        "resolved": "fleet_chatty_mod",
        "tried": [],
        "version": "1.2",
        "error": None,
    }


@pytest.mark.parametrize("specs", [42, [1, 2], {"a": 1}])
def test_bad_options_are_a_clear_error(specs):
    result = probe.collect({"specs": specs})
    assert result["ok"] is False
    assert "specs" in result["error"]


def test_by_hand_default_specs_shape():
    data = run_by_hand()
    assert data["ok"] is True
    assert data["error"] is None
    results = data["data"]["results"]
    assert set(results) == set(probe.DEFAULT_SPECS)
    for result in results.values():
        assert set(result) >= {"resolved", "tried", "version"}
        assert result["resolved"] or result["tried"], result  # what failed is said, not dropped
        for tried in result["tried"]:
            assert set(tried) == {"target", "error"}


@pytest.mark.parametrize(
    ("stub", "resolved", "version"),
    [
        (
            "torch_sm120_noarch",
            "torch.distributed._symmetric_memory:_SymmetricMemory",
            "2.7.0+cu126",
        ),
        ("torch_sm120_ok", "torch.distributed._symmetric_memory:SymmetricMemory", "2.9.0+cu128"),
        ("torch_h200", "torch.distributed._symmetric_memory:_SymmetricMemory", "2.11.0+cu130"),
    ],
)
def test_against_stub_torch(stub, resolved, version):
    result = run_by_hand({"specs": [SYMM]}, pythonpath=STUBS / stub)["data"]["results"][SYMM]
    assert result["resolved"] == resolved
    assert result["version"] == version
    if resolved.endswith(":_SymmetricMemory"):
        [tried] = result["tried"]
        assert "cannot import name 'SymmetricMemory'" in tried["error"]


@pytest.mark.torch
def test_real_torch_symmetric_memory_resolves_to_the_name_that_exists():
    torch = pytest.importorskip("torch")
    symm = pytest.importorskip("torch.distributed._symmetric_memory")
    expected = "SymmetricMemory" if hasattr(symm, "SymmetricMemory") else "_SymmetricMemory"
    result = probe.probe_spec(SYMM)
    assert result["resolved"] == "torch.distributed._symmetric_memory:" + expected
    assert result["version"] == str(torch.__version__)
