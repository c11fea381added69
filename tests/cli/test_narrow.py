"""80 columns, as in pipes and CI logs (issue 12, item 7): ids, paths and hints stay whole,
tables leave a column out instead of breaking them, no line ends in padding. In-process."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.models import Run
from fleet.store import save_run
from tests.cli.inprocess import LOOPBACK8, MIXED8, invoke, run_document, write_run
from tests.conftest import ROOT

WIDTH = 80


def assert_no_trailing_blanks(output: str) -> None:
    padded = [line for line in output.splitlines() if line != line.rstrip()]
    assert not padded, padded


def runs_listing(tmp_path: Path, inventory: str) -> tuple[str, str]:
    document = run_document(LOOPBACK8)
    document["inventory"] = inventory
    saved = save_run(Run.from_dict(document), tmp_path / "state" / "fleet" / "runs")
    done = invoke(tmp_path, "runs", columns=WIDTH)
    assert done.exit_code == 0, done.output
    assert max(len(line) for line in done.stdout.splitlines()) <= WIDTH  # the table; warnings aside
    assert_no_trailing_blanks(done.output)
    return saved.stem, done.output


def test_runs_keeps_run_ids_whole_at_80_columns(tmp_path: Path) -> None:
    run_id, output = runs_listing(tmp_path, "inv/lab.yaml")
    assert run_id in output  # the id the README tells users to copy, on one line
    assert "inv/lab.yaml" in output
    assert "8 ok" in output
    assert "left out to fit 80 columns: started (" in output  # the id says when, too


def test_runs_leaves_out_a_path_too_long_to_fit_rather_than_breaking_it(tmp_path: Path) -> None:
    inventory = "/srv/ops/inventories/production-blackwell-cluster-east-2.yaml"
    run_id, output = runs_listing(tmp_path, inventory)
    assert run_id in output
    assert "left out to fit 80 columns: inventory (" in output
    assert "production" not in output


def test_hosts_keeps_targets_and_paths_whole_at_80_columns(tmp_path: Path) -> None:
    done = invoke(
        tmp_path, "hosts", "-i", str(ROOT / "inventory" / "blackwell.yaml"), columns=WIDTH
    )
    assert done.exit_code == 0, done.output
    assert "ubuntu@bastion.example.internal:22" in done.output
    assert "/opt/sglang/.venv/bin/python" in done.output
    assert "left out to fit 80 columns:" in done.output
    assert max(len(line) for line in done.stdout.splitlines()) <= WIDTH  # the table; warnings aside
    assert_no_trailing_blanks(done.output)


def test_diff_keeps_fact_paths_whole_at_80_columns(tmp_path: Path) -> None:
    """The facts listed by name (in-cohort and software findings) print whole: a line longer
    than 80 columns is one unbreakable name alone on it."""
    for run in (LOOPBACK8, MIXED8):
        done = invoke(tmp_path, "diff", str(run), columns=WIDTH)
        document = json.loads(invoke(tmp_path, "diff", str(run), "--json", "-").stdout)
        listed = [
            name
            for finding in document["findings"]
            if finding["kind"] in ("cohort", "software")
            for name in finding["facts"]
            if "[" not in name  # a per-device fact prints once for its devices: gpu.gpus[*].name
        ]
        assert listed
        assert all(name in done.output for name in listed), done.output
        long_lines = [line for line in done.output.splitlines() if len(line) > WIDTH]
        assert all(len(line.split()) == 1 for line in long_lines), long_lines
        assert_no_trailing_blanks(done.output)


def test_status_hints_and_names_stay_whole_at_80_columns(tmp_path: Path) -> None:
    document = run_document(LOOPBACK8)
    hint = "is sshd listening there? try: ssh -p 22 ops@gpu-07.example.internal true"
    document["hosts"]["gpu-07"].update(
        status="unreachable", error="cannot connect: connection refused", hint=hint, probes={}
    )
    done = invoke(tmp_path, "show", str(write_run(tmp_path / "r.json", document)), columns=WIDTH)
    words = set(done.output.split())
    assert all(word in words for word in hint.split()), done.output
    assert "gpu-[01-06,08] (7 hosts)" in done.output
    assert_no_trailing_blanks(done.output)


def failure_block(output: str, head: str) -> list[str]:
    """The lines of the failure block that starts with `head`: its line and those indented under
    it (the error, then its hint), down to the next block or the end."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {head}  "))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("    "):
            break
        block.append(line)
    return block


def test_errors_and_hints_of_failed_hosts_show_at_80_columns(tmp_path: Path) -> None:
    """Issue 24 item 9: an unbreakable word (a fingerprint, a path) too wide for the table's
    `error / hint` column used to drop the column, and the hints were printed nowhere. They are
    printed under the table, one block per way of failing, wrapped with a hanging indent."""
    document = run_document(LOOPBACK8)
    known = "/home/operator/.config/fleet/clusters/production-east/known_hosts.d/fleet"
    fingerprint = "SHA256:1mOwXKk/r4XTFV4bOAw4Z7sYphU3x6CA8lx8R9OSez0"
    for name in ("gpu-07", "gpu-08"):
        document["hosts"][name].update(
            status="hostkey_unknown",
            error=f"host key of {name} (ops@{name}:22) is not known: {fingerprint}: "
            f"no entry for it in {known}",
            hint="check the fingerprint on the host (ssh-keygen -lf "
            "/etc/ssh/ssh_host_ed25519_key.pub), then run with --accept-new, or add it with "
            "ssh-keyscan",
            probes={},
        )
    done = invoke(tmp_path, "show", str(write_run(tmp_path / "r.json", document)), columns=WIDTH)
    assert done.exit_code == 0, done.output
    block = failure_block(done.output, "gpu-[07-08] (2 hosts)")
    text = " ".join(" ".join(block).split())
    assert "hostkey_unknown: e.g. host key of gpu-07 (ops@gpu-07:22) is not known:" in text
    assert fingerprint in text.split() or f"{fingerprint}:" in text.split()
    assert "hint: check the fingerprint on the host (ssh-keygen -lf" in text
    assert "then run with --accept-new, or add it with ssh-keyscan" in text
    assert all(line.startswith("    ") for line in block[1:]), block  # hanging, never column 0
    assert all(len(line) <= WIDTH or len(line.split()) == 1 for line in block), block
    assert "error / hint" not in done.output  # neither as a column nor as "left out"
    assert_no_trailing_blanks(done.output)
