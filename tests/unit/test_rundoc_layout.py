"""A host laid out as fleet writes it is read by its layout (fleet/rundoc.py `_fleet_host`: a
few matches per host, not a call per member) into what json.loads reads, in the plain and the
saved form; a host laid out otherwise, or with values the layout does not foresee, is read member
by member, to the same result."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from fleet import rundoc
from fleet.models import HostOutcome, ProbeResult, Run
from tests.unit.helpers import fleet_run


def odd_hosts() -> dict[str, HostOutcome]:
    """Hosts with what a layout could trip on: escapes, a traceback, no probes, exponents."""
    raised = ProbeResult(
        status="failed",
        ok=False,
        data={"why": 'a "quoted" \\ path\n', "n": 1e-07, "big": -12345678901234567890},
        error='boom: "x"\tß',
        elapsed_s=1e-05,
        output_tail="line\nline é \u2028",
        traceback='File "x.py", line 3',
    )
    fine = ProbeResult(status="ok", ok=True, data={"a": [1, 2.5]}, error=None, elapsed_s=2)
    # a payload holding what follows a result's "data" (where it ends is found as plain text)
    inner = {"inner": {"a": 1, "error": None, "elapsed_s": 2}, "then": [1]}
    tricky = ProbeResult(status="ok", ok=True, data=inner, error=None, elapsed_s=3)
    return {
        'odd "one"': HostOutcome(
            name='odd "one"',
            status="ok",
            address="a\\b",
            elapsed_s=3,
            python=None,
            probes={"p\u00e9": raised, "fine": fine},
        ),
        "none": HostOutcome(name="none", status="unreachable", address="x", error="refused"),
        **{
            name: HostOutcome(name=name, status="ok", address=name, probes={"t": tricky})
            for name in ("tricky-1", "tricky-2")
        },
    }


def both_forms(run: Run) -> list[str]:
    return ["".join(rundoc.compact_pieces(run)), "".join(rundoc.saved_pieces(run))]


def read_counting(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, int]:
    """The document read, and how many objects were read member by member."""
    calls: list[int] = []
    one_by_one = rundoc.Payloads._object

    def counted(self: rundoc.Payloads, *args: Any) -> Any:
        calls.append(1)
        return one_by_one(self, *args)

    monkeypatch.setattr(rundoc.Payloads, "_object", counted)
    return rundoc.read_document(io.StringIO(text)), len(calls)


def test_hosts_as_fleet_writes_them_are_read_by_their_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = fleet_run(30, tmp_path / "saved")
    odd = Run(fleet_version="t", started="s", finished="f", bundle_sha256="", hosts=odd_hosts())
    for source in (run, odd):
        for text in both_forms(source):
            read, one_by_one = read_counting(text, monkeypatch)
            assert read == json.loads(text)
            assert json.dumps(read) == json.dumps(json.loads(text))  # ints stay ints
            assert one_by_one == 0


def test_hosts_laid_out_otherwise_are_read_member_by_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host = {
        "status": "ok",
        "error": None,
        "hint": None,
        "address": "a",
        "elapsed_s": 1.5,
        "python": "3",
        "probes": {
            "p": {
                "status": "ok",
                "ok": True,
                "data": {"x": 1},
                "error": None,
                "elapsed_s": 0.5,
                "output_tail": "",
            }
        },
    }
    nan = json.loads(json.dumps(host))
    nan["probes"]["p"]["elapsed_s"] = float("nan")  # json writes NaN, no JSON number
    reordered = {"python": "3", **host}
    for hosts in ({"h": reordered}, {"h": nan}):
        text = json.dumps({"hosts": hosts})
        read, one_by_one = read_counting(text, monkeypatch)
        assert json.dumps(read) == json.dumps(json.loads(text))
        assert one_by_one > 0
    indented = json.dumps({"hosts": {"h": host}}, indent=2)
    read, one_by_one = read_counting(indented, monkeypatch)
    assert read == json.loads(indented)
    assert one_by_one > 0


def test_equal_payloads_read_by_the_layout_are_one_object(tmp_path: Path) -> None:
    run = fleet_run(20, tmp_path / "saved")
    read = rundoc.read_document(io.StringIO("".join(rundoc.compact_pieces(run))))
    hosts = list(read["hosts"].values())
    assert hosts[0]["probes"]["dir"]["data"] is hosts[9]["probes"]["dir"]["data"]
    assert hosts[0]["probes"]["system"]["data"] is not hosts[9]["probes"]["system"]["data"]


def test_the_executable_shares_payloads_with_the_last_run_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drift reads two runs: in the fleet executable, the second's payloads equal to the
    first's are the first's objects (saved runs too); only the last run read is kept for
    that, and fleet called in-process reads each run on its own."""
    from fleet import collector

    run = fleet_run(12, tmp_path / "saved")
    plain, saved = both_forms(run)

    def dirs(text: str) -> list[Any]:
        """Each host's "dir" payload (a saved run's from its table)."""
        document = rundoc.read_document(io.StringIO(text))
        table = document.get("payloads", {})
        results = [host["probes"]["dir"] for host in document["hosts"].values()]
        return [r["data"] if "data" in r else table[r["data_ref"]] for r in results]

    monkeypatch.setattr(rundoc, "LAST_READ", [])
    first = dirs(plain)
    assert dirs(plain)[0] is not first[0]  # in-process: each run its own
    monkeypatch.setitem(collector._START_UP, "executable", True)
    first = dirs(plain)
    assert dirs(plain)[0] is first[0]
    assert len(rundoc.LAST_READ) == 1  # the last run's payloads, not every run's
    stored = dirs(saved)
    assert dirs(saved)[0] is stored[0]
