"""Every host that did not finish is a finding (issue 46, item 2), folded across hosts with its
action, and no surface is green above an exit code that says trouble. Over the recorded mixed
loopback run with some hosts' endings changed as fleet's protocol writes them."""

from __future__ import annotations

from typing import Any

from fleet.findings.sources import host_findings
from fleet.models import Run
from fleet.render.html.findings import findings_section
from fleet.render.terminal.findings import heading
from tests.mixed_fleets import mixed8


def ended(document: dict[str, Any], host: str, status: str, error: str, hint: str | None) -> None:
    outcome = document["hosts"][host]
    outcome.update(status=status, error=error, hint=hint)
    for probe in ("torch", "nccl", "imports"):
        outcome["probes"].pop(probe, None)


def unfinished_run() -> Run:
    document = mixed8()
    timeout_hint = "raise --timeout, or leave the slow probe out with --probes"
    ended(document, "h03", "timeout", "no result within 60 s from: torch, nccl", timeout_hint)
    ended(document, "h04", "timeout", "no result within 60 s from: torch", timeout_hint)
    ended(document, "h06", "interrupted", "interrupted with 3 probe(s) unfinished", None)
    ended(document, "h08", "partial", "the runner was killed by SIGKILL before torch", None)
    document["inventory"] = "inv.yaml"
    return Run.from_dict(document)


def test_hosts_that_stopped_short_are_findings_folded_per_ending() -> None:
    found = {f.kind: f for f in host_findings(unfinished_run())}
    assert set(found) == {"timeout", "interrupted", "partial"}
    timeout = found["timeout"]
    assert (timeout.hosts, timeout.severity, timeout.action) == (("h03", "h04"), "error", "retry")
    assert timeout.what == "timed out: e.g. no result within 60 s from: torch, nccl"
    assert timeout.evidence["errors"]["no result within 60 s from: torch"] == ["h04"]
    assert timeout.fix.endswith("`fleet probe -i inv.yaml --limit h[03-04]`")
    interrupted = found["interrupted"]
    assert (interrupted.hosts, interrupted.severity) == (("h06",), "warning")
    assert interrupted.action == "retry"
    assert found["partial"].what.startswith("stopped early: the runner was killed by SIGKILL")


def test_a_partial_host_whose_probes_failed_is_said_by_those_probes() -> None:
    document = mixed8()
    torch = document["hosts"]["h03"]["probes"]["torch"]
    torch.update(status="failed", ok=False, error="ImportError: libcudart.so.13")
    document["hosts"]["h03"].update(status="partial", error="probe(s) failed: torch")
    found = host_findings(Run.from_dict(document))
    assert [(f.kind, f.hosts) for f in found] == [("probe-failed", ("h03",))]


def test_no_heading_is_green_above_trouble() -> None:
    assert "✓" in heading([], exit_code=0)
    for code in (4, 8, 64, 130):
        said = heading([], exit_code=code)
        assert "✓" not in said
        assert "green" not in said
        assert f"exit {code}" in said
        page = findings_section([], code)
        assert "verdict ok" not in page
        assert f"exit {code}" in page
    assert "verdict ok" in findings_section([], 0)
