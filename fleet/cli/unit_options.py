"""The probes' own options on the command line, built from what their units declare
(fleet/units/PROBE/probe.py, OPTIONS): a command that probes is a ProbingCommand, which offers
every unit's options, those of a unit registered after fleet.cli was imported included
(fleet.units.register: a probe of your own)."""

from __future__ import annotations

import functools
from typing import Any

import click

from fleet import api


@functools.cache
def click_option(option: Any) -> click.Option:
    """The click option for one declared probe option (a fleet.units.options.ProbeOption, as
    api.ProbeOptions.command_line() gives them); its value arrives as `option.key`."""
    common = {"help": option.help, "metavar": option.metavar, "default": option.default}
    if option.kind == "switch":
        return click.Option([option.flag, option.key], show_default=True, **common)
    if option.kind == "flag":
        return click.Option([option.flag, option.key], is_flag=True, **common)
    if option.kind == "repeat":
        return click.Option([option.flag, option.key], multiple=True, **common)
    return click.Option([option.flag, option.key], type=click.FloatRange(*option.bounds), **common)


def unit_option_keys() -> set[str]:
    return {option.key for option in api.ProbeOptions.command_line()}


class ProbingCommand(click.Command):
    """A command whose parameters include every unit's probe options, asked for each time the
    command line is read (help, parsing, completion), so that a unit registered late counts."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        have = {param.name for param in params}
        extra: list[click.Parameter] = [
            click_option(option)
            for option in api.ProbeOptions.command_line()
            if option.key not in have
        ]
        return params[:-1] + extra + params[-1:] if params else extra  # --help stays last
