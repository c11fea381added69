"""The Python API as docs/integrations.md shows it ("From Python"): the example runs as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fleet
from fleet import api
from fleet.api import fabric_runs, hosts, probing, runs
from fleet.errors import StoreError
from fleet.models import NOT_REACHED
from tests.conftest import ROOT


def readme_python_example() -> str:
    text = (ROOT / "docs" / "integrations.md").read_text()
    section = text[text.index("## From Python") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/integrations.md's 'From Python' section has no python block"
    return match.group(1)


def test_readme_example_runs_from_any_folder_with_the_venvs_python(tmp_path: Path) -> None:
    """Issue 24 item 13: run beside the clone, `import fleet` found the clone's folder `fleet/` as
    an empty namespace package (the default editable install's import hook comes after the
    current directory), and the example read a relative inventory path. Here it runs as a file
    in a folder that holds an empty `fleet/`, with the venv's python and no PYTHONPATH."""
    work = tmp_path / "beside-the-clone"
    (work / "fleet").mkdir(parents=True)
    (work / "example.py").write_text(
        readme_python_example() + "\nprint('local is', run.hosts['local'].status)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=work, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"{done.stderr}\n(a venv installed with plain `pip install -e .` fails here: install as "
        "the README says, `pip install -e '.[test]' --config-settings editable_mode=compat`)"
    )
    assert "local is ok" in done.stdout
    assert list((tmp_path / "state" / "fleet" / "runs").glob("*.json"))


def test_readme_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(readme_python_example(), "docs/integrations.md", "exec"), namespace)
    run = namespace["run"]
    assert isinstance(run, fleet.Run)
    assert run.hosts["local"].status == "ok"
    saved = Path(str(namespace["path"]))
    assert saved.is_relative_to(tmp_path / "state")
    assert oct(os.stat(saved).st_mode & 0o777) == "0o600"


def test_bad_input_raises_a_fleet_error_before_contacting_anyone(tmp_path: Path) -> None:
    with pytest.raises(fleet.FleetError, match="unknown probe 'nope'"):
        fleet.probe(inventory=str(ROOT / "inventory" / "local.yaml"), probes=["nope"])
    with pytest.raises(fleet.FleetError, match="does not exist"):
        fleet.probe(inventory=str(tmp_path / "missing.yaml"))


def test_a_failing_host_does_not_raise(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("hosts:\n  gone: {transport: local, python: /nonexistent/python3}\n")
    run = fleet.probe(inventory=str(inventory), probes=["system"])
    assert run.hosts["gone"].status == "no_python"


LOCAL = str(ROOT / "inventory" / "local.yaml")


def test_probe_takes_typed_options_and_probes_wins_over_theirs() -> None:
    options = fleet.ProbeOptions(probes=["gpu"], values={"allreduce": False}, timeout_s=60)
    run = fleet.probe(inventory=LOCAL, probes=["system"], options=options)
    assert run.probes == ("system",)
    assert fleet.probe(inventory=LOCAL, options=fleet.ProbeOptions(probes=["system"])).probes == (
        "system",
    )


def test_probe_and_keep_saves_writes_json_and_collects_what_failed(tmp_path: Path) -> None:
    options = fleet.ProbeOptions(probes=["system"])
    out = tmp_path / "run.json"
    kept = probing.probe_and_keep(LOCAL, options=options, runs_dir=tmp_path / "runs", json_path=out)
    assert kept.kept
    assert kept.errors == ()
    assert kept.saved is not None
    assert kept.saved.parent == tmp_path / "runs"
    assert kept.where == str(kept.saved)
    assert json.loads(out.read_text()) == kept.run.to_dict()
    assert api.list_runs(tmp_path / "runs") == [kept.saved]
    assert api.load_run("latest", tmp_path / "runs").to_dict() == kept.run.to_dict()

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    again = runs.keep_run(kept.run, runs_dir=blocked, json_path=tmp_path / "missing" / "run.json")
    assert not again.kept
    assert again.saved is None
    assert again.where == f"{kept.run.started} (not saved)"
    assert [type(e) for e in again.errors] == [StoreError, StoreError]
    assert again.errors[0].message.startswith(f"cannot save the run in {blocked}")
    assert again.errors[1].message.startswith(f"cannot write {tmp_path / 'missing' / 'run.json'}")
    assert runs.keep_run(kept.run, save=False) == api.KeptRun(kept.run)


def test_runs_are_resolved_listed_and_pruned(tmp_path: Path) -> None:
    run = fleet.probe(inventory=LOCAL, probes=["system"])
    first = fleet.save_run(run, tmp_path)
    second = fleet.save_run(run, tmp_path)
    assert api.list_runs(tmp_path) == [first, second]
    assert api.resolve_run("previous", tmp_path) == first
    assert api.prune_runs(tmp_path, keep=1, dry_run=True) == [first]
    assert api.list_runs(tmp_path) == [first, second]
    assert api.prune_runs(tmp_path, older_than="30d") == []
    assert api.prune_runs(tmp_path, keep=1) == [first]
    assert api.list_runs(tmp_path) == [second]


def test_write_report_writes_the_html_page(tmp_path: Path) -> None:
    run = fleet.probe(inventory=LOCAL, probes=["system"])
    written = api.write_report(run, tmp_path / "report.html", exit_code=0, source="here")
    assert written == tmp_path / "report.html"
    assert written.read_text().startswith("<!doctype html>")


def test_slurm_argv_and_inventory_probe_args(tmp_path: Path) -> None:
    assert hosts.slurm_argv(None) == ()
    assert hosts.slurm_argv("--account=a --comment='two words'") == (
        "--account=a",
        "--comment=two words",
    )
    with pytest.raises(fleet.FleetError, match="--slurm-args"):
        hosts.slurm_argv("'unclosed")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "hosts:\n  a: {transport: local, probe_args: {gpu: {expected_count: 8}}}\n"
    )
    assert hosts.inventory_probe_args(inventory) == {"a": {"gpu": {"expected_count": 8}}}
    assert hosts.inventory_probe_args(None) == {}


def test_the_rules_engine_and_fabric_load_when_first_named() -> None:
    assert api.CheckReport.__name__ == "CheckReport"
    assert api.FabricSettings().backend == "nccl"
    assert fabric_runs.parse_pairs("ring") == fabric_runs.parse_pairs(" RING ")
    assert api.FabricSettings().tolerance == 0.25
    assert "inference" in api.available_packs()
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        api.nothing_here  # noqa: B018


def test_fabric_from_python_ends_each_host_with_a_status(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "hosts:\n"
        "  gone: {transport: local, python: /nonexistent/python3}\n"
        "  lost: {transport: local, python: /nonexistent/python3}\n"
    )
    run = api.fabric(inventory=str(inventory))
    assert set(run.hosts) == {"gone", "lost"}
    assert all(o.status in NOT_REACHED for o in run.hosts.values())  # neither ran a rank
    assert run.fabric is not None
    assert run.probes == ("fabric",)
