"""JUnit XML for CI: first a `findings` suite, one test case per finding (what is wrong, where,
what to do: the same ranked list as every other surface; errors and warnings fail, information
passes); then one test suite per rule, one test case per rule and host.

fail → <failure type="error|warn"> (the fix in its text); unknown, skipped, n/a → <skipped>, but
unknown and skipped verdicts of error rules fail with --strict, as the check does;
pass → an empty test case. CI tools count failures; the gate itself is the exit code (bit 32 for
error-severity failures only), so a warning shows as a failed test without failing the pipeline.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from fleet.checks import (
    PUBLISHED_SEVERITY,
    UNJUDGED,
    CheckReport,
    RuleResult,
    RuleVerdict,
    format_value,
    observed_text,
)
from fleet.findings.model import Finding
from fleet.hostsets import compact_hosts

SUITES_NAME = "fleet check"


def junit_tree(
    report: CheckReport, timestamp: str = "", findings: Sequence[Finding] = ()
) -> ET.ElementTree:
    root = ET.Element("testsuites", name=SUITES_NAME)
    root.append(_findings_suite(findings, timestamp))
    for result in report.results:
        root.append(_suite(result, timestamp, report.strict))
    _count(root, root.findall("testsuite"))
    return ET.ElementTree(root)


def _findings_suite(findings: Sequence[Finding], timestamp: str) -> ET.Element:
    suite = ET.Element("testsuite", name="findings")
    if timestamp:
        suite.set("timestamp", timestamp)
    for finding in findings:
        hosts = compact_hosts(finding.hosts) if finding.hosts else "fleet"
        case = ET.SubElement(
            suite, "testcase", classname=f"fleet.findings.{finding.kind}", name=hosts, time="0"
        )
        where = f" {finding.where}" if finding.where else ""
        message = f"{hosts}{where}: {finding.what}"
        if finding.severity == "info":
            ET.SubElement(case, "system-out").text = message
            continue
        failure = ET.SubElement(case, "failure", type=finding.severity, message=message)
        failure.text = f"action: {finding.action}\n{finding.fix}"
    _count(suite, suite.findall("testcase"))
    return suite


def _suite(result: RuleResult, timestamp: str, strict: bool = False) -> ET.Element:
    rule = result.rule
    suite = ET.Element("testsuite", name=rule.id)
    if timestamp:
        suite.set("timestamp", timestamp)
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("severity", PUBLISHED_SEVERITY.get(rule.severity, rule.severity)),
        ("source", rule.source),
        ("description", rule.description),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    for verdict in result.verdicts:
        suite.append(_case(result, verdict, strict))
    _count(suite, suite.findall("testcase"))
    return suite


def _case(result: RuleResult, verdict: RuleVerdict, strict: bool = False) -> ET.Element:
    rule = result.rule
    case = ET.Element("testcase", classname=f"fleet.check.{rule.id}", name=verdict.host)
    case.set("time", "0")
    if strict and rule.severity == "error" and verdict.status in UNJUDGED:
        # --strict fails the check for it: the test case fails too, saying why
        failure = ET.SubElement(
            case,
            "failure",
            type=PUBLISHED_SEVERITY.get(rule.severity, rule.severity),
            message=f"{verdict.status}, a failure with --strict: {verdict.reason}".strip(": "),
        )
        failure.text = f"{rule.description}\nrule: {rule.source}".strip()
    elif verdict.status == "fail":
        observed = observed_text(rule, verdict)
        failure = ET.SubElement(
            case,
            "failure",
            type=PUBLISHED_SEVERITY.get(rule.severity, rule.severity),
            message=_failure_message(result, verdict),
        )
        failure.text = "\n".join(
            line
            for line in (
                _observed(verdict.observed, rule.kind)
                if rule.kind == "baseline"
                else (f"observed: {observed}" if observed is not None else ""),
                f"expected: {format_value(verdict.expected)}"
                if rule.kind not in ("check", "baseline")
                else "",
                verdict.reason,
                f"fix: {verdict.fix}" if verdict.fix else "",
                f"rule: {rule.source}",
            )
            if line
        )
    elif verdict.status != "pass":
        ET.SubElement(case, "skipped", message=f"{verdict.status}: {verdict.reason}".strip())
    return case


def _observed(observed: object, kind: str) -> str:
    """What the rule saw; a baseline's measurements outside their bands one per line."""
    if kind == "baseline" and isinstance(observed, list):
        return "\n".join(["observed:", *(f"  {line}" for line in observed)])
    return f"observed: {format_value(observed)}"


def _failure_message(result: RuleResult, verdict: RuleVerdict) -> str:
    if result.rule.kind == "baseline" and isinstance(verdict.observed, list) and verdict.observed:
        lines = verdict.observed
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        return f"{verdict.host}: {lines[0]}{more}"  # the one line CI shows
    observed = observed_text(result.rule, verdict)
    seen = f" (observed {observed})" if observed is not None else ""
    return f"{result.rule.description or result.rule.id}{seen}"


def _count(element: ET.Element, children: list[ET.Element]) -> None:
    """tests / failures / skipped / errors attributes, summed from test cases or suites."""
    if element.tag == "testsuite":
        tests = len(children)
        failures = sum(1 for c in children if c.find("failure") is not None)
        skipped = sum(1 for c in children if c.find("skipped") is not None)
    else:
        tests = sum(int(c.get("tests", "0")) for c in children)
        failures = sum(int(c.get("failures", "0")) for c in children)
        skipped = sum(int(c.get("skipped", "0")) for c in children)
    element.set("tests", str(tests))
    element.set("failures", str(failures))
    element.set("errors", "0")
    element.set("skipped", str(skipped))


def write_junit(
    report: CheckReport, path: Path, timestamp: str = "", findings: Sequence[Finding] = ()
) -> None:
    tree = junit_tree(report, timestamp, findings)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
