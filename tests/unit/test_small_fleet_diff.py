"""The diff on a small fleet (issue 12, item 6): a 1–1 split is a split, one cause is one block,
and a fact has one name everywhere (the diff's name is the JMESPath a rule writes)."""

from __future__ import annotations

import io
from typing import Any

import jmespath
from rich.console import Console

from fleet.analysis.across_hosts.diff import Divergence, compare_hosts
from fleet.analysis.facts import declared_facts, hashable
from fleet.checks import evaluate, host_document, parse_rules
from fleet.execution.bundle import available_probes
from fleet.models import Run
from fleet.render.terminal.diff import fleet_diff_view
from tests.cli.inprocess import LOOPBACK8, REAL_RUN_DIR, run_document

TORCH_MISSING = REAL_RUN_DIR / "local2_torch_missing.json"


def load(path: Any) -> Run:
    return Run.from_dict(run_document(path))


def two_of_loopback8() -> Run:
    document = run_document(LOOPBACK8)
    document["hosts"] = {k: v for k, v in document["hosts"].items() if k in ("gpu-01", "gpu-07")}
    return Run.from_dict(document)


def rendered(run: Run, width: int = 200) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(fleet_diff_view(compare_hosts(run.hosts.values(), declared_facts())))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_two_hosts_that_disagree_are_a_split_not_a_majority() -> None:
    text = rendered(two_of_loopback8())
    assert "majority" not in text.replace("no majority", "")
    assert "gpu-[01,07]: split on 2 fact(s), no majority" in text
    assert (
        "torch.symmetric_memory.class_name  SymmetricMemory on gpu-01; _SymmetricMemory on gpu-07"
        in text
    )
    assert "SymmetricMemory  split: present on gpu-01, missing on gpu-07" in text
    assert "resolves differently in 2× H200: SymmetricMemory on gpu-01, _SymmetricMemory" in text
    assert "no odd host: the hosts are split" in text
    assert "odd: gpu" not in text


def test_a_missing_torch_is_one_block_not_a_page() -> None:
    """The real two-host run where one Python has no torch: 13 facts that differ only because
    torch is absent fold under `_status.torch`; the python version difference stays visible."""
    diff = compare_hosts(load(TORCH_MISSING).hosts.values(), declared_facts())
    cause = next(d for d in diff.values if d.fact == "_status.torch")
    assert "packages.packages.torch" in cause.consequences
    assert "imports.results.torch.resolved" in cause.consequences
    shown = {d.fact for d in diff.values} | {s.fact for s in diff.sets}
    assert not shown & set(cause.consequences)
    assert {"system.python.version", "packages.packages.numpy"} <= shown  # not torch's doing
    text = rendered(load(TORCH_MISSING))
    assert "and so 13 more fact(s) differ" in text
    assert len(text.splitlines()) < 30, text


def divergences(run: Run) -> list[Divergence]:
    return list(compare_hosts(run.hosts.values(), declared_facts()).values)


def test_every_fact_name_in_the_diff_is_the_expression_a_rule_writes() -> None:
    for run in (load(TORCH_MISSING), load(LOOPBACK8)):
        documents = {name: host_document(o) for name, o in run.hosts.items()}
        items = divergences(run)
        assert items, run.hosts.keys()
        for item in items:
            for value, hosts in item.groups:
                for host in hosts:
                    found = jmespath.search(item.fact, documents[host])
                    assert hashable(found) == value, (item.fact, host, found, value)


def test_diff_and_checks_share_one_majority_rule() -> None:
    """A 1–1 split: the diff says split, and a uniform rule says there is no majority."""
    run = two_of_loopback8()
    [item] = [d for d in divergences(run) if d.fact == "torch.symmetric_memory.class_name"]
    rules = parse_rules(
        "rules:\n  - {id: same, uniform: torch.symmetric_memory.class_name, fix: f}\n",
        "r.yaml",
        available_probes(),
    )
    verdicts = evaluate(rules, run).results[0].verdicts
    assert item.split
    assert sorted(v.host for v in verdicts) == ["gpu-01", "gpu-07"]
    assert all("no majority" in v.reason for v in verdicts)
    three = run_document(LOOPBACK8)  # gpu-01, gpu-02 agree: both sides now name gpu-07
    three["hosts"] = {
        k: v for k, v in three["hosts"].items() if k in ("gpu-01", "gpu-02", "gpu-07")
    }
    run3 = Run.from_dict(three)
    [item3] = [d for d in divergences(run3) if d.fact == "torch.symmetric_memory.class_name"]
    failing = [v.host for v in evaluate(rules, run3).results[0].verdicts if v.status == "fail"]
    assert not item3.split
    assert item3.differing_hosts == ("gpu-07",) == tuple(failing)
