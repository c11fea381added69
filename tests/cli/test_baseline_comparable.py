"""`--baseline latest` compares like with like, and every surface says the same verdict (issue
46, item 7): a newer run narrowed by --limit or -p is passed over (and said), a run is never its
own baseline, and runs of different inventories are "no drift among what both compare" in the
terminal, Markdown, JSON and HTML alike, never a green "no drift". In-process, over recorded
real runs and this machine's own probe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.inprocess import GPULESS, LOOPBACK8, invoke, run_document
from tests.cli.inprocess import save_document as save

EXIT_DRIFT = 16
INVENTORY = "inv/lab.yaml"


def narrowed(document: dict[str, Any], hosts: tuple[str, ...], probes: tuple[str, ...]) -> Any:
    """`document` as `--limit HOSTS -p PROBES` would have probed it."""
    subset = json.loads(json.dumps(document))
    subset["probes"] = list(probes)
    subset["limit"] = ",".join(hosts)
    subset["hosts"] = {name: subset["hosts"][name] for name in hosts}
    for host in subset["hosts"].values():
        host["probes"] = {p: host["probes"][p] for p in probes}
    return subset


def test_baseline_latest_passes_over_a_newer_subset_run(tmp_path: Path) -> None:
    full = run_document(LOOPBACK8)
    upgraded = json.loads(json.dumps(full))
    upgraded["hosts"]["gpu-05"]["probes"]["torch"]["data"]["version"] = "2.12.0+cu130"
    save(tmp_path, full, "2026-11-30T01:00:00.000Z", inventory=INVENTORY)
    subset = narrowed(full, ("gpu-01",), ("system",))
    save(tmp_path, subset, "2026-11-30T02:00:00.000Z", inventory=INVENTORY)
    new = save(tmp_path, upgraded, "2026-11-30T03:00:00.000Z", inventory=INVENTORY)
    page = tmp_path / "page.html"
    done = invoke(tmp_path, "report", new.stem, "--baseline", "latest", "-o", str(page))
    assert done.exit_code == 0, done.output  # report's exit is the hosts' own
    html = page.read_text()
    assert "torch.version" in html  # the change on gpu-05: the subset run never saw it
    assert "1 newer run(s) of fewer hosts (--limit) or probes (-p) passed over" in html
    assert "no drift" not in html


def test_baseline_latest_of_a_probe_is_the_run_covering_its_probes(tmp_path: Path) -> None:
    """This machine, really probed: `-p system,packages`, then `-p system`, then
    `-p system,packages --baseline latest` compares with the first, all probes compared."""
    for probes in ("system,packages", "system"):
        assert invoke(tmp_path, "probe", "-p", probes).exit_code == 0
    done = invoke(tmp_path, "probe", "-p", "system,packages", "--baseline", "latest")
    assert done.exit_code == 0, done.output
    assert "1 newer run(s) of fewer hosts (--limit) or probes (-p) passed over" in done.output
    assert "not compared" not in done.output
    assert "drift from" in done.output
    assert ": none\n" in done.output


def test_other_inventories_are_not_a_green_no_drift_on_any_surface(tmp_path: Path) -> None:
    old = save(tmp_path, run_document(GPULESS), "2026-11-30T01:00:00.000Z")
    new = save(tmp_path, run_document(LOOPBACK8), "2026-11-30T02:00:00.000Z")
    terminal = invoke(tmp_path, "diff", old.stem, new.stem)
    assert "warning: the runs are of different inventories" in terminal.output
    assert "none among what both runs compare" in terminal.output
    assert ": none\n" not in terminal.output
    markdown = invoke(tmp_path, "diff", old.stem, new.stem, "--format", "markdown").output
    assert "No drift among what both runs compare." in markdown
    document = json.loads(invoke(tmp_path, "diff", old.stem, new.stem, "--json", "-").stdout)
    assert document["drift_found"] is False
    assert document["comparable"] is False
    page = tmp_path / "page.html"
    assert (
        invoke(tmp_path, "report", new.stem, "--baseline", old.stem, "-o", str(page)).exit_code == 0
    )
    html = page.read_text()
    assert "warning: the runs are of different inventories" in html
    assert 'class="ok">no drift' not in html
    assert "no drift among what both runs compare" in html
