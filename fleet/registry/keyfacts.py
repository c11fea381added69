"""What a unit's KEY_FACTS rows are: the facts an operator looks at first, as data.

A row is (label, paths into the probes' data), shown joined by " / " (a missing fact prints as
"—"). Paths are key tuples, the probe first, because keys such as import specs hold dots. The
terminal's key facts table shows every unit's rows in fleet.registry.UNITS' order."""

from __future__ import annotations

from typing import Union

KeyPath = tuple[Union[str, int], ...]  # Union: the controller runs on Python 3.9 too
KeyFact = tuple[str, tuple[KeyPath, ...]]
