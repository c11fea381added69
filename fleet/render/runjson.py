"""A run's document on stdout (`--json -`), written a host at a time (fleet/rundoc.py): the
render layer's door to the run writer, which the CLI may not import directly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleet.models import Run


def print_run_json(run: Run, write: Callable[[str], Any]) -> None:
    from fleet.rundoc import write_indented_run  # once the run is done: not before its hosts

    write_indented_run(run, write)
