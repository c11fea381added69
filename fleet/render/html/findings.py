"""The page's first section: the run's findings, most severe first — what is wrong, where, and
what to do — the same ranked list the terminal, JSON, Markdown and JUnit give."""

from __future__ import annotations

from collections.abc import Sequence

from fleet.findings.from_checks import MATRIX_EXAMPLES
from fleet.findings.model import Finding
from fleet.render.html.markup import esc, hosts_label, row, table

SEVERITY_CLASS = {"error": "sev-error", "warning": "sev-warning", "info": "dim"}


def findings_section(findings: Sequence[Finding], exit_code: int | None = None) -> str:
    """The findings table; none: said green only where the exit code says nothing wrong."""
    if not findings and exit_code:  # every host that did not finish is a finding: never here
        return (
            f'<p class="verdict odd"><b>no findings</b> in what fleet could judge, yet exit '
            f"{exit_code}</p>"
        )
    if not findings:
        return '<p class="verdict ok"><b>no findings</b>: nothing wrong that fleet can see</p>'
    rows = [_row(finding) for finding in findings]
    return table(["severity", "hosts", "where", "what", "action", "fix"], rows, css="findings")


def _every(finding: Finding) -> str:
    """A matrix's every cell (P2P pairs, links) under a finding that names two of them."""
    observed = finding.evidence.get("observed")
    if not isinstance(observed, list) or len(observed) <= MATRIX_EXAMPLES:
        return ""
    items = "; ".join(str(item) for item in observed)
    return f"<details><summary>all {len(observed)}</summary>{esc(items)}</details>"


def _row(finding: Finding) -> str:
    related = len(finding.evidence.get("related") or ())
    more = f" <span class=dim>(+{related} related)</span>" if related else ""
    severity = f'<span class="{SEVERITY_CLASS[finding.severity]}">{esc(finding.severity)}</span>'
    return row(
        [
            severity,
            hosts_label(finding.hosts) if finding.hosts else "fleet",
            esc(finding.where),
            esc(finding.what) + more + _every(finding),
            f"<code>{esc(finding.action)}</code>",
            esc(finding.fix),
        ],
        key=" ".join(finding.hosts),
    )
