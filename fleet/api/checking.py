"""Checking: rules (built-in packs, your files) loaded and validated, then judged against a run.

The rules engine (jmespath) loads on first use, not when fleet is imported."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.checks import DEFAULT_PACK
from fleet.execution.bundle import available_probes, refuse_broken
from fleet.models import Run

if TYPE_CHECKING:
    from fleet.analysis.classes import FactCache
    from fleet.checks import CheckReport, Probing, Rule

__all__ = [
    "DEFAULT_PACK",
    "RulePacks",
    "available_packs",
    "check",
    "evaluate",
    "load_checks",
    "packs_folder",
    "rule_packs",
]


@dataclass(frozen=True)
class RulePacks:
    """The built-in rule packs: their names, the folder of their files, the default one."""

    names: tuple[str, ...]
    folder: Path
    default: str = DEFAULT_PACK


def rule_packs() -> RulePacks:
    """The built-in rule packs (`fleet check --pack NAME`, its help)."""
    return RulePacks(tuple(available_packs()), packs_folder())


def available_packs() -> list[str]:
    """The built-in rule packs' names (`fleet check --pack NAME`)."""
    from fleet.checks import available_packs as packs

    return packs()


def packs_folder() -> Path:
    """The folder of the built-in rule packs (NAME.yaml each): copy one to start your own."""
    from fleet.checks import packs_folder as folder

    return folder()


def load_checks(
    packs: Sequence[str] = (),
    rules_files: Sequence[str | Path] = (),
    probe_dirs: Sequence[str | Path] = (),
    run_probes: Sequence[str] = (),
) -> tuple[list[Rule], list[str]]:
    """Every rule of the packs and files, validated together (ids unique across them), and where
    each set came from. No packs and no files: the `inference` pack. Rules may read your own
    probes too (`probe_dirs`, $FLEET_PROBE_DIR), and the probes of the saved run they will judge
    (`run_probes`, its Run.probes), wherever their files are now."""
    found = load_rule_set(packs, rules_files, probe_dirs, run_probes)
    return found.rules, list(found.sources)


@dataclass(frozen=True)
class RuleSet:
    """The rules of some packs and files, where they came from, and how they want the hosts
    probed (their `probing:` together)."""

    rules: list[Rule]
    sources: tuple[str, ...]
    probing: Probing


def load_rule_set(
    packs: Sequence[str] = (),
    rules_files: Sequence[str | Path] = (),
    probe_dirs: Sequence[str | Path] = (),
    run_probes: Sequence[str] = (),
    among: Collection[str] | None = None,
) -> RuleSet:
    """load_checks, with the files' `probing:`. A rule that two packs share (one took it from
    the other with `rules_from`: the same rule at the same FILE:LINE) is judged once. `among`:
    with no packs and no files named, only the default pack's rules that read none but these
    probes (what `fleet probe` judges of a run of them; the pack's index says which)."""
    from fleet.checks import check_unique_ids, load_rules_file, pack_path, rules_reading_only

    chosen = [(f"pack {name}", pack_path(name)) for name in (packs or ())]
    chosen += [(str(path), Path(path)) for path in rules_files]
    keep = None
    if not chosen:
        chosen = [(f"pack {DEFAULT_PACK}", pack_path(DEFAULT_PACK))]
        keep = None if among is None else rules_reading_only(DEFAULT_PACK, among)
    probes = available_probes(probe_dirs)
    names = [*probes, *(n for n in run_probes if n not in probes)]
    rules: list[Rule] = []
    seen: set[tuple[str, str]] = set()
    probing: Probing | None = None
    for label, path in chosen:
        loaded = load_rules_file(path, names, label, keep)
        rules += [r for r in loaded.rules if (r.id, r.source) not in seen]
        seen |= {(r.id, r.source) for r in loaded.rules}
        probing = loaded.probing if probing is None else probing.merged(loaded.probing)
    check_unique_ids(rules)
    needed = {n for rule in rules for n in rule.needs if n in probes and n not in run_probes}
    refuse_broken(
        (probes[n] for n in sorted(needed)), probes, "or leave out the rules that read it"
    )
    assert probing is not None  # at least one file was read
    return RuleSet(rules, tuple(label for label, _ in chosen), probing)


def needs_index() -> dict[str, dict[str, list[str]]]:
    """What each built-in rule reads, pack by pack: fleet/checks/packs/needs.json, made again by
    `python3 -c "from fleet.api.checking import write_needs_index; write_needs_index()"` when a
    pack changes (tests/unit/test_pack_index.py says so)."""
    return {
        pack: {rule.id: list(rule.needs) for rule in load_rule_set([pack]).rules}
        for pack in available_packs()
    }


def write_needs_index() -> Path:
    from fleet.checks import NEEDS_INDEX

    path = packs_folder() / NEEDS_INDEX
    path.write_text(json.dumps(needs_index(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def evaluate(
    rules: Sequence[Rule],
    run: Run,
    probe_args: Mapping[str, Mapping[str, Any]] | None = None,
    strict: bool = False,
    classes: FactCache | None = None,
) -> CheckReport:
    """Judge `run` against rules from load_checks; `probe_args` per host name are the
    inventory's (rules read them as `_args`; see inventory_probe_args). `strict`: an error rule
    not judged on some host fails the check (`fleet check --strict`). `classes`: the run's
    payloads as cross_host_diff classed them (its `classes`), not classed again."""
    from fleet.checks import evaluate as judge

    return judge(rules, run, probe_args or {}, strict, classes=classes)


def check(
    run: Run,
    packs: Sequence[str] = (),
    rules_files: Sequence[str | Path] = (),
    probe_args: Mapping[str, Mapping[str, Any]] | None = None,
    probe_dirs: Sequence[str | Path] = (),
    strict: bool = False,
) -> CheckReport:
    """Judge `run` against rules (default: the inference pack); `probe_args` per host name are the
    inventory's (rules read them as `_args`); `strict` as for evaluate. Rules may read every probe
    the run carries."""
    rules, _ = load_checks(packs, rules_files, probe_dirs, run.probes)
    return evaluate(rules, run, probe_args, strict)
