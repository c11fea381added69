"""A probe's options as its unit declares them (fleet/units/PROBE/probe.py, OPTIONS): what the
command line offers (fleet.cli builds its click options from these), what the Python API takes
(ProbeOptions.values, by `key`), and what each does to the probing: the probe arguments it fills,
whether it adds or drops the probe, the least per-host timeout it needs. Below every stage: a
declaration, no click and no fleet import."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["flag", "switch", "repeat", "seconds"]


@dataclass(frozen=True)
class ProbeOption:
    """One option of a probe. `kind`: flag (off unless given), switch (`--x/--no-x`, on unless
    switched off), repeat (text, given any number of times), seconds (a number in `bounds`).
    Two units may declare the same `key` (`quick`): one option on the command line, its value
    handed to each."""

    key: str  # its name in ProbeOptions.values and the click parameter's name
    flag: str  # "--quick"; a switch: "--allreduce/--no-allreduce"
    help: str
    kind: Kind = "flag"
    arg: str | None = None  # the probe argument its value fills (None: it fills none)
    adds: bool = False  # given, the probe runs even where it is not chosen (opt-in, a -p list)
    drops: bool = False  # a switch turned off drops the probe from the default set
    least_timeout_s: float = 0.0  # given, each host's timeout is at least this
    metavar: str | None = None
    bounds: tuple[float, float] = (0.0, 86400.0)  # seconds: the range it accepts
    to_args: Callable[[Any], Mapping[str, Any]] | None = None  # the arguments, when not {arg: v}

    @property
    def default(self) -> Any:
        return {"flag": False, "switch": True, "repeat": (), "seconds": None}[self.kind]

    def given(self, value: Any) -> bool:
        """Whether `value` asks for anything: a switch only when it is turned off."""
        if self.kind == "switch":
            return value is False
        return bool(value) if self.kind != "seconds" else value is not None

    def probe_args(self, value: Any) -> dict[str, Any]:
        """What `value` sets in the probe's arguments ({} when it was not given)."""
        if not self.given(value) or self.kind == "switch":
            return {}
        if self.to_args is not None:
            return dict(self.to_args(value))
        if self.arg is None:
            return {}
        return {self.arg: list(value) if self.kind == "repeat" else value}
