"""`fleet check` never looks green when it judged nothing (issue 12, items 1 and 2), in-process."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from fleet.api import checking
from tests.cli.inprocess import GPULESS, LOOPBACK8, invoke, run_document, write_run

BIT_CHECK_FAILED = 32

# How many rules the inference pack has: the messages count them.
PACK_RULES = len(checking.load_checks(["inference"])[0])


def test_gpu_less_host_is_incomplete_not_passed_and_says_why(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--details", "--run", str(GPULESS))
    assert done.exit_code == 0, done.output  # not judged is reported; only --strict gates on it
    assert "check passed" not in done.output
    assert "? check incomplete" in done.output
    assert "probe gpu absent: nvidia-smi not found" in done.output
    summary = done.output.split("check incomplete", 1)[1]
    assert "not judged:" in summary
    assert "rules on local: probe gpu absent" in summary


def test_strict_fails_when_error_rules_were_not_judged(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--details", "--run", str(GPULESS), "--strict")
    assert done.exit_code == BIT_CHECK_FAILED, done.output


def test_json_document_says_incomplete(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--run", str(GPULESS), "--json", "-")
    document = json.loads(done.stdout)
    assert document["passed"] is False
    assert document["outcome"] == "incomplete"
    reasons = {c["reason"] for c in document["not_judged"]}
    assert "probe gpu absent: nvidia-smi not found" in reasons


def unreachable_fleet(tmp_path: Path, count: int) -> Path:
    """The recorded 8-host run, with `count` hosts that could not be connected to."""
    document = run_document(LOOPBACK8)
    for index, name in enumerate(list(document["hosts"])[:count]):
        host = document["hosts"][name]
        host.update(
            status="unreachable",
            address=f"10.0.0.{index}",
            error=f"cannot connect to {name} (10.0.0.{index}:22): connection refused",
            probes={},
        )
    return write_run(tmp_path / "run.json", copy.deepcopy(document))


def test_unreachable_reason_is_said_once_not_under_every_rule(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--run", str(unreachable_fleet(tmp_path, 3)))
    assert done.output.count("connection refused") == 1, done.output  # the finding says it
    assert "✗ gpu-[01-03]: not reached (unreachable)" in done.output
    assert f"all {PACK_RULES} rules on gpu-[01-03] (skipped: host unreachable" in done.output
    assert "check passed" not in done.output


def test_no_host_reached_prints_no_rule_list(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--run", str(unreachable_fleet(tmp_path, 8)))
    assert f"all {PACK_RULES} rules on gpu-[01-08] (skipped: host unreachable" in done.output
    assert done.output.count("connection refused") == 1
    assert done.output.startswith("? check incomplete"), done.output
    assert len(done.output.splitlines()) < 12, done.output
    details = invoke(tmp_path, "check", "--details", "--run", str(unreachable_fleet(tmp_path, 8)))
    assert f"no host was reached: none of {PACK_RULES} rule(s) judged" in details.output


def test_html_page_says_incomplete_like_the_terminal_and_json(tmp_path: Path) -> None:
    """One truth: the page attached to a ticket never says green when nothing was judged."""
    out = tmp_path / "check.html"
    done = invoke(tmp_path, "check", "--run", str(GPULESS), "--html", str(out))
    assert done.exit_code == 0, done.output
    page = out.read_text()
    assert "check passed" not in page
    assert '<p class="verdict odd"><b>check incomplete</b>: no error failures' in page
    terminal_detail = done.output.split("? check incomplete: ", 1)[1].splitlines()[0]
    assert terminal_detail.split(";")[0] in page  # the same words on both surfaces


# ------------------------------------------------------------------ issue 24, item 11


def test_each_reason_not_judged_is_printed_once(tmp_path: Path) -> None:
    """A host without GPUs: the rules list their verdicts, `not judged:` says each reason once
    (each skipped rule used to repeat it under itself: 56 lines for one host)."""
    done = invoke(tmp_path, "check", "--run", str(GPULESS), columns=80)
    assert " ".join(done.output.split()).count("nvidia-smi not found") == 1, done.output
    # one -p left the four probes out: one line says so
    assert done.output.count("were not run") == 1, done.output
    assert "probes health, allreduce, live, net were not run" in " ".join(done.output.split())
    # the verdict, what was judged, the findings heading, a line or two per reason, the tally
    assert len(done.output.splitlines()) <= 20, done.output
    details = invoke(tmp_path, "check", "--details", "--run", str(GPULESS), columns=80)
    # with --details, a line per rule besides: each reason still said once in its summary
    assert " ".join(details.output.split()).count("nvidia-smi not found") == 2, details.output
    assert len(details.output.splitlines()) <= PACK_RULES + 35, details.output


def test_rules_not_judged_are_explained_in_words_not_jmespath(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--details", "--run", str(GPULESS))
    (line,) = [x for x in done.output.splitlines() if x.startswith("    unknown torch-arch")]
    assert line == (
        "    unknown torch-arch-supported (every GPU's compute capability has kernels in torch's"
        " arch list) on local: cannot be judged: torch.devices is empty"
    )
    for jmespath in ("unique(", "[?", "`", "every(", "not reported here"):
        assert jmespath not in done.output, done.output


def test_strict_says_it_failed_because_of_strict_everywhere(tmp_path: Path) -> None:
    """--strict exits 32: the terminal, JSON, HTML and JUnit all say the check failed, and why,
    instead of the `incomplete` wording of a check that exits 0."""
    html, junit = tmp_path / "check.html", tmp_path / "check.xml"
    args = ("check", "--details", "--run", str(GPULESS), "--strict")
    done = invoke(tmp_path, *args, "--html", str(html), "--junit", str(junit))
    assert done.exit_code == BIT_CHECK_FAILED, done.output
    assert "✗ check failed (--strict): no error failures, but 41 error-rule" in done.output
    assert "which --strict counts as failures" in done.output
    assert "incomplete" not in done.output
    assert "--strict counts error rules not judged" not in done.output  # said in the verdict
    page = html.read_text()
    assert '<p class="verdict bad"><b>check failed (--strict)</b>: no error failures' in page
    assert "check incomplete" not in page
    document = json.loads(invoke(tmp_path, *args, "--json", "-").stdout)
    assert (document["outcome"], document["passed"], document["strict"]) == ("failed", False, True)
    suites = junit.read_text()
    assert 'failures="41"' in suites.split("\n", 2)[1], suites[:300]
    assert "skipped, a failure with --strict: probe gpu absent" in suites


def test_a_failing_check_rule_never_says_its_reported_value_was_not_reported(
    tmp_path: Path,
) -> None:
    """A `check:` rule without `observed:` (or whose observed value is null) fails on facts that
    were reported: it said `observed (not reported)` on every surface."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - id: torch-2-6\n"
        "    description: torch 2.6 everywhere\n"
        "    severity: error\n"
        "    check: \"torch.version == '2.6.0'\"\n"
        "    fix: install torch 2.6.0\n"
        "  - id: cxx11-abi-off\n"
        "    description: the old C++ ABI\n"
        "    severity: error\n"
        "    check: 'torch.cxx11_abi == `false`'\n"
        "    observed: torch.no_such_fact\n"
        "    fix: use a pre-cxx11 build\n"
    )
    html, junit = tmp_path / "check.html", tmp_path / "check.xml"
    args = ("check", "--details", "--run", str(GPULESS), "--rules", str(rules))
    done = invoke(tmp_path, *args, "--html", str(html), "--junit", str(junit))
    assert done.exit_code == BIT_CHECK_FAILED, done.output
    assert done.output.count("local: failed") == 2, done.output
    assert "observed" not in done.output
    for surface in (html.read_text(), junit.read_text()):
        assert "(not reported)" not in surface
    assert "observed" not in junit.read_text()


H200X1 = GPULESS.parent / "h200x1_default_run.json"  # the real one-GPU host, probed as users do
ALLREDUCE_RULES = {
    "allreduce-correct",
    "allreduce-latency-nvlink",
    "allreduce-latency-pcie",
    "allreduce-busbw-nvlink",
    "allreduce-busbw-pcie",
    "allreduce-configured-variant",
}


def verdicts_of(document: dict) -> dict[str, tuple[str, str]]:
    """rule id → (status, reason) on the one host of a fleet.check document."""
    return {
        rule["id"]: (host["verdict"], host["reason"] or "")
        for rule in document["rules"]
        for host in rule["hosts"].values()
    }


def test_a_healthy_one_gpu_host_passes_with_allreduce_rules_not_applicable(
    tmp_path: Path,
) -> None:
    """Issue 45: an allreduce needs two GPUs; on one its rules do not apply (n/a, with the
    probe's reason), and the verdict is complete."""
    done = invoke(tmp_path, "check", "--run", str(H200X1), "--json", "-")
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["outcome"] == "passed", document
    verdicts = verdicts_of(document)
    for rule in ALLREDUCE_RULES:
        assert verdicts[rule] == (
            "n/a",
            "probe allreduce does not apply: only 1 GPU: an allreduce needs 2 or more",
        )
    shown = invoke(tmp_path, "check", "--run", str(H200X1))
    assert shown.output.startswith("✓ check passed"), shown.output
    strict = invoke(tmp_path, "check", "--run", str(H200X1), "--strict")
    assert strict.exit_code == 0, strict.output  # n/a is judged: --strict has nothing to fail
    shown = invoke(tmp_path, "show", str(H200X1))  # the probe's own line says it as the rules do
    assert "allreduce  n/a: only 1 GPU: an allreduce needs 2 or more" in shown.output


def test_an_allreduce_that_did_not_run_on_two_gpus_is_still_incomplete(tmp_path: Path) -> None:
    """The same host with two GPUs whose allreduce could not run (no CUDA for torch): not
    judged, so incomplete, and --strict fails it."""
    document = run_document(H200X1)
    allreduce = document["hosts"]["local"]["probes"]["allreduce"]
    allreduce["data"] = {**allreduce["data"], "device_count": 2}
    del allreduce["data"]["not_applicable"]
    allreduce["error"] = "CUDA not available (torch 2.11.0+cu130); backend gloo runs on CPU"
    path = write_run(tmp_path / "two.json", document)
    done = invoke(tmp_path, "check", "--run", str(path), "--json", "-")
    assert json.loads(done.stdout)["outcome"] == "incomplete"
    assert verdicts_of(json.loads(done.stdout))["allreduce-correct"][0] == "skipped"
    strict = invoke(tmp_path, "check", "--run", str(path), "--strict")
    assert strict.exit_code == BIT_CHECK_FAILED, strict.output
