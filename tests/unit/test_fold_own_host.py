"""A finding that names its own host folds across hosts (issue 46, item 6): the host's own name
is blanked before findings are grouped, so 4 hosts that read alike are one line naming the 4,
and 500 are one line; a name that only starts like the host's (h1 in h10) is left alone. And a
drift's findings say the sentence `fleet probe` says, not a rule id and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.findings.fold import fold
from fleet.findings.model import Finding
from tests.cli.inprocess import invoke
from tests.cli.inprocess import save_document as save
from tests.mixed_fleets import mixed8


def own(host: str, other: str = "h99") -> Finding:
    return Finding(
        "warning",
        "nccl-rdma-devices-uniform",
        f"{host}: RDMA devices mlx5_0, where {other} has mlx5_0, mlx5_1",
        (host,),
        "fix-config",
        f"{host}: give {host} the same RDMA devices as the other hosts",
    )


def test_four_hosts_naming_themselves_are_one_finding_naming_the_four() -> None:
    folded = fold([own(f"h0{n}") for n in range(1, 5)])
    assert len(folded) == 1
    assert folded[0].hosts == ("h01", "h02", "h03", "h04")
    assert folded[0].what.startswith("h[01-04]: RDMA devices mlx5_0, where h99 has")
    assert folded[0].fix == "h[01-04]: give h[01-04] the same RDMA devices as the other hosts"


def test_five_hundred_are_one_line() -> None:
    folded = fold([own(f"gpu-{n:03d}") for n in range(500)])
    assert len(folded) == 1
    assert len(folded[0].hosts) == 500


def test_a_name_that_only_starts_like_the_host_is_not_blanked() -> None:
    folded = fold([own("h1", other="h10"), own("h2", other="h20")])
    assert len(folded) == 2  # h10 and h20 are other hosts: the findings differ


def test_the_same_text_still_folds_when_a_host_is_named_like_a_word_in_it() -> None:
    """Hosts `a` and `b` that read `a module is missing` are one finding: alike as written,
    before any name is blanked (blanking `a` on host a alone would have split them)."""
    said = [
        Finding("warning", "probe-failed", "probe x failed: a module is missing", (h,))
        for h in "ab"
    ]
    folded = fold(said)
    assert [(f.hosts, f.what) for f in folded] == [
        (("a", "b"), "probe x failed: a module is missing")
    ]


def test_drift_findings_say_the_sentence_not_a_rule_id_and_json(tmp_path: Path) -> None:
    old = save(tmp_path, mixed8(), "2026-11-30T01:00:00.000Z")
    new = save(tmp_path, mixed8(), "2026-11-30T02:00:00.000Z")
    done = invoke(tmp_path, "diff", old.stem, new.stem)
    assert "h07: NCCL transport settings differ: NCCL_ALGO=Tree" in " ".join(done.output.split())
    assert "nccl-transport-settings-uniform:" not in done.output
    assert '{"NCCL_ALGO"' not in done.output
    document = json.loads(invoke(tmp_path, "diff", old.stem, new.stem, "--json", "-").stdout)
    whats = [finding["what"] for finding in document["findings"]]
    assert any(what.startswith("NCCL transport settings differ") for what in whats)
