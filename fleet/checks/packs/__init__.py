"""Built-in rule packs: YAML rules files shipped with fleet (`fleet check --pack NAME`).

Each pack is an ordinary rules file; copy one and pass the copy with `--rules` to change it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection
from importlib import resources
from pathlib import Path

from fleet.errors import UsageError

# The pack judged when none is named (`fleet probe`'s findings, a bare `fleet check`).
DEFAULT_PACK = "inference"


def available_packs() -> list[str]:
    return sorted(
        entry.name[: -len(".yaml")]
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(".yaml")
    )


def packs_folder() -> Path:
    """Where the built-in packs are (for `fleet check --help`: copy one to start your own)."""
    return Path(str(resources.files(__name__)))


def pack_path(name: str) -> Path:
    """The file of pack `name`; UsageError listing the packs when there is none by that name."""
    if name in available_packs():
        return Path(str(resources.files(__name__) / f"{name}.yaml"))
    raise UsageError(
        f"there is no rule pack {name!r}",
        hint=f"packs: {', '.join(available_packs())}; or pass your own file with --rules",
    )


# What each built-in rule reads: {pack: {rule id: [probe, …]}}, the `needs` its expressions give
# (tests/unit/test_pack_index.py holds it equal to the packs and says how to write it again).
NEEDS_INDEX = "needs.json"


def rules_reading_only(pack: str, probes: Collection[str]) -> frozenset[str] | None:
    """The ids of `pack`'s rules that read none but `probes` (None: the pack is not indexed).
    `fleet probe` judges only those, so only those need parsing."""
    needs = _needs_index().get(pack)
    if needs is None:
        return None
    return frozenset(rule for rule, read in needs.items() if set(read) <= set(probes))


@functools.lru_cache(maxsize=1)
def _needs_index() -> dict[str, dict[str, list[str]]]:
    """The index, read once a process: `fleet probe` asks it whether any rule applies, then which
    (fleet.api.judging.RulesLater, then fleet.api.checking.load_rule_set)."""
    index: dict[str, dict[str, list[str]]] = json.loads(
        (resources.files(__name__) / NEEDS_INDEX).read_text(encoding="utf-8")
    )
    return index
