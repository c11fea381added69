"""Verdicts at matrix scale (issue 13.3): a failing P2P matrix on the 8x RTX PRO 6000 box (its real
nvidia-smi topology) is summarised by value with counts and example pairs, not printed as 56 pairs
in "observed" and again in the fix. The JSON report keeps every pair."""

from __future__ import annotations

from io import StringIO
from typing import Any

from rich.console import Console

from fleet.checks import evaluate, format_value
from fleet.render.terminal.checks import render_report
from tests.recorded import host_with_p2p, make_run
from tests.unit.helpers import pack_rules, verdict


def rendered(report: Any) -> str:
    console = Console(file=StringIO(), width=250, no_color=True)
    render_report(console, report)
    return console.file.getvalue()  # type: ignore[attr-defined, no-any-return]


def test_all_56_pairs_failing_read_as_one_value_with_count_and_examples() -> None:
    host = host_with_p2p({"PIX": "NS", "NODE": "NS", "SYS": "NS"})  # e.g. the IOMMU blocks P2P
    report = evaluate(pack_rules(), make_run(box=host))
    failed = verdict(report, "p2p-all-pairs", "box")
    assert failed.status == "fail"
    assert len(failed.observed) == 56
    summary = "56 pairs: NS × 56 (e.g. GPU0→GPU1, GPU0→GPU2, GPU0→GPU3)"
    assert f"P2P is not OK for {summary}: NCCL" in failed.fix
    text = rendered(report)
    assert f"box: observed {summary}" in text
    assert "GPU7→GPU6" not in text  # no pair beyond the examples is listed
    assert text.count("→") == 6  # three examples, in "observed" and in the fix


def test_distinct_values_are_counted_most_common_first() -> None:
    host = host_with_p2p({"PIX": "OK", "NODE": "CNS", "SYS": "NS"})  # across sockets: worse
    failed = verdict(evaluate(pack_rules(), make_run(box=host)), "p2p-all-pairs", "box")
    assert format_value(failed.observed) == (
        "48 pairs: NS × 32 (e.g. GPU0→GPU4, GPU0→GPU5, GPU0→GPU6); "
        "CNS × 16 (e.g. GPU0→GPU2, GPU0→GPU3, GPU1→GPU2)"
    )


def test_short_lists_are_shown_whole_and_long_plain_lists_by_distinct_item() -> None:
    assert format_value(["GPU0→GPU1: NS", "GPU1→GPU0: NS"]) == "GPU0→GPU1: NS, GPU1→GPU0: NS"
    assert format_value(["12.0"] * 8 + ["9.0"]) == "9 items: 12.0 × 8, 9.0"
    many = [f"sm_{n}" for n in range(20)]
    assert format_value(many).endswith("sm_7, … (12 more distinct)")
