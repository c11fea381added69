"""The published JSON Schemas (fleet/schemas/, docs/schemas/) against the documents fleet writes:
the golden runs, and fresh run, fabric, diff, drift and check documents made by the code itself."""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import pkgutil
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fleet.execution.bundle import build_bundle
from fleet.execution.fanout import FanOut, RunSettings
from fleet.execution.protocol import ExecResult
from fleet.models import HOST_STATUSES, READABLE_RUN_SCHEMAS, RUN_SCHEMA, Host, HostOutcome, Run
from fleet.schemas import KINDS, schema_for
from fleet.store import save_run
from tests.conftest import ROOT
from tests.helpers import invoke_fleet
from tests.memory_transport import MemoryTransport, Script, runner_lines
from tests.schema_check import errors

RUN_ID = re.compile(r'"schema":\s*"fleet\.run/')
GOLDEN = ROOT / "tests" / "probes" / "golden" / "real_run"
REAL_H200 = GOLDEN / "h200x2_run.json"  # the real 2×H200 run
LOOPBACK8 = GOLDEN / "loopback8_two_odd.json"
DOCS = ROOT / "docs" / "schemas"
PACKAGE = ROOT / "fleet" / "schemas"


def as_written(document: Any) -> Any:
    """Through JSON as fleet writes it (default=str), so tuples are lists and so on."""
    return json.loads(json.dumps(document, default=str))


def golden_runs() -> list[Path]:
    """Every file under tests/ that holds a run document (found by its id, so new ones count)."""
    return sorted(
        p
        for p in (ROOT / "tests").rglob("*.json")
        if RUN_ID.search(p.read_text(encoding="utf-8", errors="replace"))
    )


# ------------------------------------------------------------------------- the schemas themselves


@pytest.mark.parametrize("kind", KINDS)
def test_each_schema_is_valid_draft_2020_12_with_its_own_id(kind: str) -> None:
    schema = schema_for(kind)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"urn:fleet:schemas:{kind}"


@pytest.mark.parametrize("kind", KINDS)
def test_docs_publish_the_packaged_schemas_byte_for_byte(kind: str) -> None:
    name = f"{kind}.schema.json"
    assert (DOCS / name).read_bytes() == (PACKAGE / name).read_bytes(), (
        f"docs/schemas/{name} differs from fleet/schemas/{name}: the package is the source; "
        "run `cp fleet/schemas/*.schema.json docs/schemas/`"
    )


def test_docs_hold_no_schema_the_package_lacks() -> None:
    assert sorted(p.name for p in DOCS.glob("*.json")) == sorted(f"{k}.schema.json" for k in KINDS)


def test_schema_for_names_the_kinds_it_knows() -> None:
    with pytest.raises(ValueError, match="one of run, fabric, diff, drift, check"):
        schema_for("report")
    first = schema_for("run")
    first["title"] = "changed"
    assert schema_for("run")["title"] != "changed"  # a fresh copy each call


def constant(package: str, name: str) -> Any:
    """A constant from wherever `package` keeps it (a module may be split or renamed)."""
    root = importlib.import_module(package)
    modules = [root] + [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(root.__path__, package + ".")
    ]
    for module in modules:
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(f"no {name} in {package}")


def test_the_ids_in_the_schemas_are_the_ids_the_code_writes() -> None:
    run = schema_for("run")["properties"]["schema"]["enum"]
    assert run[0] == RUN_SCHEMA
    assert set(run) == set(READABLE_RUN_SCHEMAS)  # what validates is what loads
    assert schema_for("diff")["properties"]["schema"]["enum"][0] == constant(
        "fleet.render", "DIFF_SCHEMA"
    )
    assert schema_for("drift")["properties"]["schema"]["enum"][0] == constant(
        "fleet.render", "DIFF_SCHEMA"
    )
    assert schema_for("check")["properties"]["schema"]["enum"][0] == constant(
        "fleet.checks", "CHECK_SCHEMA"
    )
    assert schema_for("fabric")["properties"]["schema"]["enum"][0] == constant(
        "fleet.fabric", "FABRIC_SCHEMA"
    )


def test_the_closed_lists_in_the_schemas_are_the_codes() -> None:
    run = schema_for("run")["$defs"]
    assert tuple(run["hostStatus"]["enum"]) == HOST_STATUSES
    check = schema_for("check")["$defs"]
    assert tuple(check["verdict"]["enum"]) == constant("fleet.checks", "VERDICTS")
    rule = check["rule"]["properties"]
    published = constant("fleet.checks", "PUBLISHED_SEVERITY")
    severities = tuple(published.get(s, s) for s in constant("fleet.checks", "SEVERITIES"))
    assert tuple(rule["severity"]["enum"]) == severities  # the document's words (`warn`)
    assert tuple(rule["kind"]["enum"]) == constant("fleet.checks", "KINDS")
    fabric = schema_for("fabric")["$defs"]
    group_statuses = fabric["group"]["properties"]["status"]["enum"]
    assert tuple(group_statuses) == constant("fleet.fabric", "GROUP_STATUSES")
    assert set(fabric["backend"]["enum"]) == set(constant("fleet.fabric", "DEFAULT_SIZES"))


# -------------------------------------------------------------------------------------- runs


def test_the_golden_runs_include_the_real_h200_run() -> None:
    assert REAL_H200 in golden_runs()
    assert len(golden_runs()) >= 5


@pytest.mark.parametrize("path", golden_runs(), ids=lambda p: p.name)
def test_every_golden_run_validates(path: Path) -> None:
    assert errors("run", json.loads(path.read_text())) == []


def made_run(outcomes: Mapping[str, HostOutcome], **fields: Any) -> Run:
    """A Run of these outcomes, stamped as the API stamps one."""
    return Run(
        fleet_version="0.1.0",
        started="2026-12-01T00:00:00.000Z",
        finished="2026-12-01T00:00:09.000Z",
        bundle_sha256="ab" * 32,
        hosts=outcomes,
        inventory="inv.yaml",
        **fields,
    )


def test_a_fresh_local_run_validates_as_json_and_as_saved(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    inventory = ROOT / "inventory" / "local.yaml"
    done = invoke_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--json", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["schema"] == RUN_SCHEMA
    assert errors("run", document) == []
    (saved,) = (tmp_path / "state" / "fleet" / "runs").glob("*.json")
    stored = json.loads(saved.read_text())
    assert "payloads" in stored  # the saved form: data_ref into payloads
    assert errors("run", stored) == []


def test_a_run_where_hosts_end_every_way_validates(tmp_path: Path) -> None:
    """Through the fan-out (in-memory transport): ok, auth_failed, partial, timeout; saved too."""
    from fleet.errors import AuthError

    transport = MemoryTransport(
        {
            "good": Script(runner_lines({"system": {"hostname": "good"}})),
            "denied": Script(error=AuthError("permission denied")),
            "killed": Script(runner_lines({}, done=False), result=ExecResult(None, "KILL")),
            "hung": Script(runner_lines({"system": {}}), pause_s=60),
        }
    )

    async def run() -> Run:
        fan_out = FanOut(
            build_bundle(["system"]), {"memory": transport}, RunSettings(timeout_s=0.5)
        )
        hosts = [Host(name=n, address=n, transport="memory") for n in transport.scripts]
        return made_run(await fan_out.run(hosts), probes=("system",), transport="ssh")

    result = asyncio.run(run())
    assert {o.status for o in result.hosts.values()} == {"ok", "auth_failed", "partial", "timeout"}
    assert errors("run", as_written(result.to_dict())) == []
    saved = json.loads(save_run(result, tmp_path).read_text())
    assert errors("run", saved) == []


def fabric_run() -> Run:
    """A `fleet fabric` run as its rounds conclude one: pairs ok, failed and skipped, a ring,
    a host not reached, a host without torch."""
    from fleet.errors import UnreachableError
    from fleet.fabric.results import GroupResult, SizeResult
    from fleet.fabric.run import Discovery, FabricRounds, FabricSettings

    def sizes(busbw: float) -> tuple[SizeResult, ...]:
        return (
            SizeResult(8, 2e-5, 4e-4, 4e-4, True),
            SizeResult(1 << 20, 1e-4, busbw, busbw, True),
        )

    env = {"a": {"NCCL_DEBUG": "WARN"}, "b": {"NCCL_DEBUG": "WARN"}}
    pairs = [
        GroupResult(("a", "b"), "ok", 2, "a", 29500, sizes(10.0), env=env),
        GroupResult(("b", "c"), "failed", 2, "b", 29501, error="master b: rank 0 exited", round=1),
        GroupResult(("c", "gone"), "skipped", error="gone not reached", round=1),
    ]
    ring = GroupResult(("a", "b", "c"), "ok", 3, "a", 29502, sizes(8.0), round=2)
    found = Discovery(
        usable={"a": [0], "b": [0], "c": [0]},
        unreached={"gone": UnreachableError("connection refused")},
        unusable={"notorch": "notorch: no torch"},
        python={"a": "3.12.3", "b": "3.12.3", "c": "3.12.3", "notorch": "3.12.3"},
    )
    hosts = [Host(name=n, address=n) for n in ("a", "b", "c", "gone", "notorch")]
    outcome = FabricRounds({}, FabricSettings()).conclude(hosts, found, pairs, ring)
    return made_run(
        outcome.outcomes,
        probes=("fabric",),
        interrupted=outcome.interrupted,
        transport="ssh",
        fabric=outcome.section,
    )


def test_a_fabric_run_validates_with_its_section_and_each_hosts_view() -> None:
    document = as_written(fabric_run().to_dict())
    assert document["fabric"]["schema"] == constant("fleet.fabric", "FABRIC_SCHEMA")
    assert errors("run", document) == []
    assert errors("fabric", document["fabric"]) == []


def test_a_fabric_hosts_view_is_held_to_its_shape() -> None:
    document = as_written(fabric_run().to_dict())
    document["hosts"]["a"]["probes"]["fabric"]["data"]["busbw"] = 1.0  # not a field it has
    assert any("busbw" in e for e in errors("run", document))


# ------------------------------------------------------------------------- diff, drift, check


@pytest.mark.parametrize("path", golden_runs(), ids=lambda p: p.name)
def test_the_diff_of_every_golden_run_validates(path: Path, tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "diff", str(path), "--json", "-")
    assert done.returncode == 0, done.stderr
    assert errors("diff", json.loads(done.stdout)) == []


def test_a_diff_with_splits_and_folded_consequences_validates(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "diff", str(GOLDEN / "local2_torch_missing.json"), "--json", "-")
    document = json.loads(done.stdout)
    assert any(v["consequences"] for v in document["values"])  # the shape is exercised
    assert any(v["fact"].startswith("_status.") for v in document["values"])
    assert errors("diff", document) == []


def drifted(tmp_path: Path) -> Path:
    """The 8-host run again: one host gone, one torch upgraded, one probe failed."""
    document = json.loads(LOOPBACK8.read_text())
    del document["hosts"]["gpu-02"]
    document["hosts"]["gpu-03"]["probes"]["torch"]["data"]["version"] = "2.12.0+cu130"
    nccl = document["hosts"]["gpu-04"]["probes"]["nccl"]
    nccl.update(status="failed", ok=False, error="probe exited with code 1")
    path = tmp_path / "new.json"
    path.write_text(json.dumps(document))
    return path


def test_a_drift_document_validates(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "diff", str(LOOPBACK8), str(drifted(tmp_path)), "--json", "-")
    assert done.returncode == 16, done.stderr
    document = json.loads(done.stdout)
    assert document["kind"] == "drift"
    assert {c["kind"] for c in document["changes"]} >= {"value"}
    assert errors("drift", document) == []
    assert errors("diff", document) != []  # the same id, another kind: not a hosts diff


def test_drift_between_runs_of_different_inventories_validates(tmp_path: Path) -> None:
    done = invoke_fleet(
        tmp_path, "diff", str(REAL_H200), str(GOLDEN / "h200x2_matrix_run.json"), "--json", "-"
    )
    document = json.loads(done.stdout)
    assert document["probes_only_old"]  # the matrix run ran one probe only
    assert errors("drift", document) == []


@pytest.mark.parametrize("path", golden_runs(), ids=lambda p: p.name)
def test_the_check_of_every_golden_run_validates(path: Path, tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "check", "--run", str(path), "--json", "-")
    document = json.loads(done.stdout)
    assert document["rules_from"]  # the CLI's form: the report, the run and the rules
    assert errors("check", document) == []


def test_the_check_report_from_python_validates_without_the_cli_keys() -> None:
    from fleet.checks import evaluate, load_rules, pack_path
    from fleet.execution.bundle import available_probes

    rules = load_rules(pack_path("inference"), available_probes())
    for run in (Run.from_dict(json.loads(LOOPBACK8.read_text())), fabric_run()):
        assert errors("check", as_written(evaluate(rules, run).to_dict())) == []


# ---------------------------------------------------------------------- the schemas can fail


def broken_runs() -> dict[str, Any]:
    good = json.loads(REAL_H200.read_text())
    cases: dict[str, Any] = {}

    def case(name: str, change: Any) -> None:
        document = copy.deepcopy(good)
        change(document)
        cases[name] = document

    host = "local"
    case("no hosts", lambda d: d.pop("hosts"))
    case("unknown id", lambda d: d.update(schema="fleet.run/9"))
    case("unknown top-level key", lambda d: d.update(extra=1))
    case("host without status", lambda d: d["hosts"][host].pop("status"))
    case("unknown host status", lambda d: d["hosts"][host].update(status="fine"))
    case("unknown host key", lambda d: d["hosts"][host].update(rack="r1"))
    case("probe without data", lambda d: d["hosts"][host]["probes"]["gpu"].pop("data"))
    case(
        "data_ref without payloads",
        lambda d: d["hosts"][host]["probes"]["gpu"].update(data_ref="0" * 64),
    )
    case("ok disagrees with status", lambda d: d["hosts"][host]["probes"]["gpu"].update(ok=False))
    case("data not an object", lambda d: d["hosts"][host]["probes"]["gpu"].update(data=[1]))
    case("bundle not a sha256", lambda d: d.update(bundle_sha256="x"))
    return cases


@pytest.mark.parametrize(("name", "document"), broken_runs().items(), ids=list(broken_runs()))
def test_a_broken_run_envelope_fails(name: str, document: Any) -> None:
    assert errors("run", document), name


def test_broken_diff_drift_and_check_documents_fail(tmp_path: Path) -> None:
    diff = json.loads(invoke_fleet(tmp_path, "diff", str(LOOPBACK8), "--json", "-").stdout)
    assert errors(
        "diff", {**diff, "schema": "fleet.analysis.across_hosts.diff/1"}
    )  # the id that slipped
    assert errors("diff", {**diff, "values": [{"fact": "x"}]})
    check = json.loads(
        invoke_fleet(tmp_path, "check", "--run", str(LOOPBACK8), "--json", "-").stdout
    )
    assert check["outcome"] == "failed"
    assert errors("check", {**check, "passed": True})  # passed contradicts the outcome
    assert errors("check", {**check, "schema": "fleet.check/1"})
    drift = json.loads(
        invoke_fleet(tmp_path, "diff", str(LOOPBACK8), str(drifted(tmp_path)), "--json", "-").stdout
    )
    drift["changes"][0]["kind"] = "renamed"
    assert errors("drift", drift)
