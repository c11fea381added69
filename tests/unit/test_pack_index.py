"""fleet/checks/packs/needs.json: what each built-in rule reads. `fleet probe` parses only the
default pack's rules that read none but the probes it runs (the others are never judged there);
the index must say exactly what the packs say, or a new rule would go unjudged."""

from __future__ import annotations

import json

from fleet.api.checking import load_rule_set, needs_index
from fleet.api.judging import Judging, RulesLater, read_rules
from fleet.checks import NEEDS_INDEX, packs_folder, rules_reading_only

REMAKE = 'python3 -c "from fleet.api.checking import write_needs_index; write_needs_index()"'


def test_the_index_says_what_every_built_in_rule_reads() -> None:
    written = json.loads((packs_folder() / NEEDS_INDEX).read_text(encoding="utf-8"))
    assert written == needs_index(), f"a pack changed: write the index again with {REMAKE}"


def test_a_probe_run_parses_only_the_rules_that_read_its_probes() -> None:
    probes = ["system", "gpu", "health"]
    some = read_rules(Judging(rules=True), among=probes)[0]
    every = load_rule_set().rules
    wanted = [r.id for r in every if set(r.needs) <= set(probes)]
    assert [r.id for r in some] == wanted
    assert 0 < len(wanted) < len(every)
    assert rules_reading_only("inference", probes) == frozenset(wanted)


def test_no_rule_is_parsed_for_probes_none_of_them_reads() -> None:
    assert read_rules(Judging(rules=True), among=["system", "packages"])[0] == []


def test_fleet_check_reads_every_rule_of_the_pack() -> None:
    """A check reports the rules it could not judge too: all of them are read."""
    later = RulesLater(Judging(rules=True, gate=True), ["system"])
    assert later.among is None
    probe = RulesLater(Judging(rules=True), ["system"])
    assert probe.among == ["system"]


def test_a_pack_without_an_index_entry_is_read_whole() -> None:
    assert rules_reading_only("no-such-pack", ["system"]) is None
