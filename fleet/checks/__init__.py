"""Pre-flight checks: rules written in YAML with JMESPath conditions (`rules`), judged per host,
and the built-in packs (`packs/`). Pure: a Run in, a CheckReport out."""

from fleet.analysis.facts import allreduce_summary
from fleet.checks.rules import (
    CHECK_SCHEMA,
    CheckReport,
    EvaluationError,
    Expression,
    Rule,
    RuleFileError,
    RuleResult,
    Verdict,
    check_unique_ids,
    compile_expression,
    evaluate,
    format_value,
    host_document,
    load_rules,
    parse_rules,
    render_fix,
    truthy,
)

__all__ = [
    "CHECK_SCHEMA",
    "CheckReport",
    "EvaluationError",
    "Expression",
    "Rule",
    "RuleFileError",
    "RuleResult",
    "Verdict",
    "allreduce_summary",
    "check_unique_ids",
    "compile_expression",
    "evaluate",
    "format_value",
    "host_document",
    "load_rules",
    "parse_rules",
    "render_fix",
    "truthy",
]
