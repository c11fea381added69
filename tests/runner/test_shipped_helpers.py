"""Helper files a probe ships (`SHIPS`): importable on the host by module name, one copy per
bundle however many probes ship it, and named by FILE:LINE in a traceback (issue 37)."""

from __future__ import annotations

import json
import textwrap

import pytest

from fleet.execution.bundle import Bundle, ProbeFileError, ProbeSource, build_bundle
from tests.runner.conftest import run_bundle

HELPER = """
CALLS = []


def double(value):
    CALLS.append(value)
    return value * 2


def explode():
    raise ValueError("from the helper")
"""
USES_HELPER = """
SHIPS = ("_twice.py",)
import _twice


def collect(options):
    return {"ok": True, "data": {"twice": _twice.double(21)}, "error": None}
"""
ALSO_USES_HELPER = """
SHIPS = ("_twice.py",)
from _twice import double


def collect(options):
    return {"ok": True, "data": {"same": double(1)}, "error": None}
"""
RAISES_IN_HELPER = """
SHIPS = ("_twice.py",)
import _twice


def collect(options):
    _twice.explode()
"""


def bundle_of(probes: dict[str, str], files: dict[str, str]) -> Bundle:
    runner = build_bundle(["system"]).runner
    sources = {
        name: ProbeSource(name, textwrap.dedent(src), "", files, path=f"probes/{name}.py")
        for name, src in probes.items()
    }
    return Bundle(runner=runner, probes=sources)


def test_two_probes_import_one_shipped_helper_sent_once() -> None:
    bundle = bundle_of({"first": USES_HELPER, "second": ALSO_USES_HELPER}, {"_twice.py": HELPER})
    script = bundle.script({}, 60, 4).decode()
    assert script.count("def double(value)") == 1  # once in the bundle, not once per probe
    outcome = run_bundle(bundle)["local"]
    assert outcome.probes["first"].data == {"twice": 42}
    assert outcome.probes["second"].data == {"same": 2}


def test_a_helper_that_raises_is_named_by_its_file_and_line() -> None:
    result = run_bundle(bundle_of({"raiser": RAISES_IN_HELPER}, {"_twice.py": HELPER}))["local"]
    probe = result.probes["raiser"]
    assert probe.status == "failed"
    assert 'File "probes/_twice.py", line 11, in explode' in probe.traceback
    assert 'raise ValueError("from the helper")' in probe.traceback


def test_two_probes_shipping_different_files_of_one_name_are_refused() -> None:
    runner = build_bundle(["system"]).runner
    bundle = Bundle(
        runner=runner,
        probes={
            "a": ProbeSource("a", USES_HELPER, "", {"_twice.py": HELPER}, path="mine/a.py"),
            "b": ProbeSource("b", USES_HELPER, "", {"_twice.py": "X = 1\n"}, path="yours/b.py"),
        },
    )
    with pytest.raises(ProbeFileError, match=r"yours/b.py: ships _twice.py, and probe 'a'"):
        bundle.script({}, 60, 4)


def test_fleets_own_probes_ship_every_helper_once() -> None:
    bundle = build_bundle()
    payload_line = bundle.script({}, 60, 4).decode().split("BUNDLE = json.loads(", 1)[1]
    payload = json.loads(json.loads(payload_line.split(")\n", 1)[0]))
    for probe, names in payload["ships"].items():
        assert all(name in payload["modules"] for name in names), probe
