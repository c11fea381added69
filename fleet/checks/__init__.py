"""Pre-flight checks: rules written in YAML with JMESPath conditions, judged per host, and the
built-in packs (`packs/`). Pure: a Run in, a CheckReport out. The language: docs/rules.md.

    language   JMESPath with fleet's functions: Expression, compile_expression, truthy
    model      Rule, RuleVerdict (one rule on one host), RuleResult, CheckReport, NotJudged,
               ACTIONS (the words a rule's `action:` and a finding's action are)
    parser     rules files read and validated (load_rules, parse_rules): RuleFileError at FILE:LINE
    documents  what a rule reads about one host (host_document; units add helpers: HostHelpers)
    sharing    hosts grouped by what they reported, each rule judged once per group (HostDocuments)
    reads      what a rule's JMESPath can see of a host's document
    evaluate   every rule judged on every host; uniform: the cross-host rules
    fixes      fix texts and values as a person reads them (render_fix, format_value,
               pairs_summary)
    packs/     the built-in rules files (available_packs, pack_path)

Import from `fleet.checks`, not from its modules. Each name loads its module on first use
(PEP 562), so that what needs one light piece (the findings' ACTIONS, the packs' index read by
`fleet probe`) does not load the rules engine and jmespath (tests/unit/test_startup_imports.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet.checks.actions import ACTIONS
    from fleet.checks.documents import HostHelpers, host_document, plain_copy
    from fleet.checks.evaluate import evaluate
    from fleet.checks.fixes import LONG_LIST, format_value, observed_text, pairs_summary, render_fix
    from fleet.checks.language import EvaluationError, Expression, compile_expression, truthy
    from fleet.checks.model import (
        CHECK_SCHEMA,
        PUBLISHED_SEVERITY,
        SEVERITIES,
        UNJUDGED,
        VERDICTS,
        CheckReport,
        NotJudged,
        Probing,
        Rule,
        RuleResult,
        RulesFile,
        RuleVerdict,
        Verdicts,
    )
    from fleet.checks.packs import (
        DEFAULT_PACK,
        NEEDS_INDEX,
        available_packs,
        pack_path,
        packs_folder,
        rules_reading_only,
    )
    from fleet.checks.parser import (
        RuleFileError,
        check_unique_ids,
        load_rules,
        load_rules_file,
        parse_rules,
        parse_rules_file,
    )
    from fleet.checks.reads import Reads, seen
    from fleet.checks.sharing import HostDocuments

_HOMES = {  # each public name: the module that defines it
    "ACTIONS": "fleet.checks.actions",
    "CHECK_SCHEMA": "fleet.checks.model",
    "CheckReport": "fleet.checks.model",
    "EvaluationError": "fleet.checks.language",
    "Expression": "fleet.checks.language",
    "HostDocuments": "fleet.checks.sharing",
    "HostHelpers": "fleet.checks.documents",
    "LONG_LIST": "fleet.checks.fixes",
    "NEEDS_INDEX": "fleet.checks.packs",
    "NotJudged": "fleet.checks.model",
    "PUBLISHED_SEVERITY": "fleet.checks.model",
    "Probing": "fleet.checks.model",
    "Reads": "fleet.checks.reads",
    "Rule": "fleet.checks.model",
    "RuleFileError": "fleet.checks.parser",
    "RuleResult": "fleet.checks.model",
    "RuleVerdict": "fleet.checks.model",
    "RulesFile": "fleet.checks.model",
    "SEVERITIES": "fleet.checks.model",
    "UNJUDGED": "fleet.checks.model",
    "VERDICTS": "fleet.checks.model",
    "Verdicts": "fleet.checks.model",
    "available_packs": "fleet.checks.packs",
    "check_unique_ids": "fleet.checks.parser",
    "compile_expression": "fleet.checks.language",
    "evaluate": "fleet.checks.evaluate",
    "format_value": "fleet.checks.fixes",
    "host_document": "fleet.checks.documents",
    "load_rules": "fleet.checks.parser",
    "load_rules_file": "fleet.checks.parser",
    "observed_text": "fleet.checks.fixes",
    "DEFAULT_PACK": "fleet.checks.packs",
    "pack_path": "fleet.checks.packs",
    "packs_folder": "fleet.checks.packs",
    "pairs_summary": "fleet.checks.fixes",
    "parse_rules": "fleet.checks.parser",
    "parse_rules_file": "fleet.checks.parser",
    "plain_copy": "fleet.checks.documents",
    "render_fix": "fleet.checks.fixes",
    "rules_reading_only": "fleet.checks.packs",
    "seen": "fleet.checks.reads",
    "truthy": "fleet.checks.language",
}

__all__ = [
    "ACTIONS",
    "CHECK_SCHEMA",
    "DEFAULT_PACK",
    "LONG_LIST",
    "NEEDS_INDEX",
    "PUBLISHED_SEVERITY",
    "SEVERITIES",
    "UNJUDGED",
    "VERDICTS",
    "CheckReport",
    "EvaluationError",
    "Expression",
    "HostDocuments",
    "HostHelpers",
    "NotJudged",
    "Probing",
    "Reads",
    "Rule",
    "RuleFileError",
    "RuleResult",
    "RuleVerdict",
    "RulesFile",
    "Verdicts",
    "available_packs",
    "check_unique_ids",
    "compile_expression",
    "evaluate",
    "format_value",
    "host_document",
    "load_rules",
    "load_rules_file",
    "observed_text",
    "pack_path",
    "packs_folder",
    "pairs_summary",
    "parse_rules",
    "parse_rules_file",
    "plain_copy",
    "render_fix",
    "rules_reading_only",
    "seen",
    "truthy",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found once: the next lookup is the module's own
    return value
