"""Judging.gate is `fleet check`'s way of judging, named in its five parts (issue 47): each part
is read where it acts (fleet/api/assessing.py), so each says what it does."""

from __future__ import annotations

from fleet.api.judging import Judging

PARTS = (
    "rules_set_exit",
    "judges_every_rule",
    "shows_verdicts",
    "measures_line_rates",
    "band_sets_drift",
)


def parts(judging: Judging) -> dict[str, bool]:
    return {name: getattr(judging, name) for name in PARTS}


def test_fleet_check_turns_on_every_part_but_the_band_as_drift() -> None:
    assert parts(Judging(rules=True, gate=True)) == {
        "rules_set_exit": True,
        "judges_every_rule": True,
        "shows_verdicts": True,
        "measures_line_rates": True,
        "band_sets_drift": False,  # a band's verdict is a check rule there
    }


def test_the_other_commands_only_say_what_they_found() -> None:
    assert parts(Judging(rules=True)) == {
        "rules_set_exit": False,
        "judges_every_rule": False,
        "shows_verdicts": False,
        "measures_line_rates": False,
        "band_sets_drift": True,  # fleet probe --baseline-file: outside a band is exit bit 16
    }
    assert not Judging(gate=True).measures_line_rates  # no rules, nothing to show them with
