"""Every `fleet.X/N` id the code writes has its schema in fleet/schemas/, and the documents of
hosts, runs and baseline (`--json`) validate against theirs, made from real inputs: the example
inventory, saved runs, the real 2×H200 runs (jobs: tests of `fleet jobs`)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from fleet.api.commands import RUNS_SCHEMA
from fleet.inventory.document import HOSTS_SCHEMA
from fleet.schemas import KINDS, schema_for
from tests.conftest import ROOT
from tests.helpers import invoke_fleet
from tests.schema_check import errors

REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run"
DOCUMENT_ID = re.compile(r"[\"']fleet\.([a-z_]+)/(\d+)[\"']")
SHARED_IDS = {"diff": ("diff", "drift")}  # fleet.diff/N: the cross-host diff and the drift


def test_every_document_id_the_code_writes_has_its_schema() -> None:
    written = {
        match.group(1)
        for path in (ROOT / "fleet").rglob("*.py")
        for match in DOCUMENT_ID.finditer(path.read_text())
    }
    assert written >= {"run", "diff", "check", "baseline", "hosts", "jobs", "runs"}
    for kind in written:
        for schema in SHARED_IDS.get(kind, (kind,)):
            assert schema in KINDS, f"fleet.{kind}/N is written but has no schema"
            assert f"fleet.{kind}/" in json.dumps(schema_for(schema)["properties"]["schema"])


def test_the_new_schemas_hold_the_ids_the_code_writes() -> None:
    assert schema_for("hosts")["properties"]["schema"]["const"] == HOSTS_SCHEMA
    assert schema_for("runs")["properties"]["schema"]["const"] == RUNS_SCHEMA


def test_fleet_hosts_json_of_the_example_inventory_validates(tmp_path: Path) -> None:
    inventory = ROOT / "inventory" / "blackwell.yaml"
    done = invoke_fleet(tmp_path, "hosts", "-i", str(inventory), "--json", "-")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["hosts"]["gpu-01"]["jump_host"]["name"] == "bastion"
    assert errors("hosts", document) == []
    assert errors("hosts", {**document, "schema": "fleet.hosts/2"})
    broken = {**document, "hosts": {"gpu-01": {**document["hosts"]["gpu-01"], "port": "22"}}}
    assert errors("hosts", broken)


def test_fleet_hosts_json_writes_a_file_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "hosts.json"
    done = invoke_fleet(tmp_path, "hosts", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out} (" in done.stderr
    assert errors("hosts", json.loads(out.read_text())) == []
    assert "local" in done.stdout  # the table too: stdout is free


def test_fleet_hosts_json_alone_still_prints_the_document(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "hosts", "--json")
    assert done.returncode == 0, done.stderr
    assert "deprecated: write --json -" in done.stderr
    assert json.loads(done.stdout)["schema"] == HOSTS_SCHEMA


def test_fleet_runs_json_validates_with_an_unreadable_run(tmp_path: Path) -> None:
    runs = tmp_path / "state" / "fleet" / "runs"
    runs.mkdir(parents=True)
    shutil.copy(REAL_RUN / "h200x2_run.json", runs / "2026-01-01T000000Z-local.json")
    (runs / "2026-01-02T000000Z-broken.json").write_text("{}")
    done = invoke_fleet(tmp_path, "runs", "--json", "-")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert errors("runs", document) == []
    readable, broken = document["runs"]
    assert readable["hosts"] == 1
    assert readable["statuses"] == {"ok": 1}
    assert broken["error"].startswith("cannot read run")


def test_fleet_baseline_json_is_the_baseline_document(tmp_path: Path) -> None:
    out = tmp_path / "baseline.json"
    runs = (str(REAL_RUN / "h200x2_run.json"), str(REAL_RUN / "h200x2_matrix_run.json"))
    done = invoke_fleet(tmp_path, "baseline", *runs, "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out} (" in done.stderr
    document = json.loads(out.read_text())
    assert document["schema"] == "fleet.baseline/1"
    assert errors("baseline", document) == []
