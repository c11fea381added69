"""Classes of probe payloads: payloads whose facts are the same, found without flattening each
(FactCache). A payload is classed by its masked dump (its fields left out of the comparison, such
as hostnames, GPU UUIDs and timings, replaced, then marshalled: C speed), or, in the executable, as
the payload the run reader made it an edit of (Run.payload_edits) where its edits are only at
fields left out. The diff, the drift and the rules' judging of one run share one cache.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from fleet.analysis.facts import (
    HostFacts,
    ProbeFacts,
    measurements,
    status_path,
    walk_payload,
)
from fleet.models import PayloadEdit, ProbeResult


class FactCache:
    """Flattens each distinct probe payload once. Runs loaded from the store share one object per
    identical payload, so in a big fleet most hosts cost a dictionary lookup, not a flatten.

    Payloads that differ only in fields left out of the comparison (hostnames, GPU UUIDs, bus ids,
    timings: identity, volatile, measure) are one payload too: each flatten records where it left
    fields out (its mask: 2-GPU and 8-GPU hosts mask apart), and the next payload of that probe is
    masked there and dumped (dump_of: marshal, C speed); the same dump is the same facts (plain JSON
    data, the same keys in the same order; a payload whose keys come in another order is only
    flattened again). Each distinct mask is kept once, with every dump seen through it, so the
    work follows the distinct answers (and kinds of payload), not the hosts. Measurements are
    still read from each payload."""

    def __init__(self, declarations: Mapping[str, ProbeFacts], measure: bool = True) -> None:
        self.declarations = declarations
        self.measure = measure  # False: no measurements read (the checks only need classes)
        self._parts: dict[tuple[str, str, int], tuple[int, HostFacts]] = {}
        self._classes: dict[tuple[str, str, int], PayloadClass] = {}
        self._masks: dict[str, dict[Mask, int]] = {}  # per probe: mask → its number
        self._trees: list[MaskTree] = []  # by mask number
        self._masked: dict[tuple[str, int, Dump], tuple[tuple[int, HostFacts], PayloadClass]] = {}
        self._tried: dict[str, list[int]] = {}  # per probe, its masks' numbers, the last hit first
        self._edits: list[Mapping[int, PayloadEdit]] = []  # runs' payloads read as edits
        self._covered: dict[tuple[int, int], bool] = {}  # (mask number, id(edit's paths)) → …
        self.flattened = 0  # payloads flattened (walked field by field): the costly step
        self.dumped = 0  # payloads masked and dumped to find their class

    def read_as_edits(self, edits: Mapping[int, PayloadEdit]) -> None:
        """A run's payloads that its reader made as edits of others (Run.payload_edits): each
        is classed as the payload it edits, without being masked and dumped, where every edit
        is at a field that payload's class leaves out (a GPU payload whose UUIDs and serials
        are its host's own: 20,000 of them at 20,000 hosts)."""
        if edits and all(known is not edits for known in self._edits):
            self._edits.append(edits)

    def part(self, probe: str, result: ProbeResult) -> tuple[int, HostFacts]:
        """(content key, facts) of one probe's result; equal keys mean equal facts."""
        payload = (probe, result.status, id(result.data))
        found = self._parts.get(payload)
        if found is None:
            found = self._parts[payload] = self._flatten(probe, result, payload)
        return found

    def payload_class(self, probe: str, result: ProbeResult) -> PayloadClass:
        """(class number, mask): results of one class have the same status and the same data
        but at the fields of the mask (None: none left out, the class is one payload object)."""
        payload = (probe, result.status, id(result.data))
        found = self._classes.get(payload)
        if found is None:
            self.part(probe, result)
            found = self._classes[payload]
        return found

    def _flatten(
        self, probe: str, result: ProbeResult, payload: tuple[str, str, int]
    ) -> tuple[int, HostFacts]:
        edited = self._as_edited(probe, result, payload) if self._edits else None
        if edited is not None:
            return edited
        order = self._tried.setdefault(probe, [])
        for position, number in enumerate(order):
            self.dumped += 1
            dump = masked_dump(result.data, self._trees[number])
            if dump is None:
                continue  # this mask's fields are not all there: another kind of payload
            known = self._masked.get((result.status, number, dump))
            if known is not None:
                if position:
                    order.insert(0, order.pop(position))  # the mask that fits, tried first next
                (key, facts), self._classes[payload] = known
                return key, self._with_own_measures(probe, result, facts)
        self.flattened += 1
        facts = HostFacts(skipped=[])
        facts.values[status_path(probe)] = result.status
        walk_payload(result.data, probe, self.declarations.get(probe, ProbeFacts()), facts)
        facts.measures.update(self._measurements(probe, result.data))
        content = (probe, frozenset(facts.values.items()), frozenset(facts.sets.items()))
        found = (hash(content), facts)
        mask = tuple(facts.skipped or ())
        facts.skipped = None
        kind = self._remember(probe, result, mask, found)  # no mask: equal payloads are alike
        if kind is None:  # a class of its own: this payload object (and hosts sharing it)
            kind = (-1 - len(self._classes), None)
        self._classes[payload] = kind
        return found

    def _as_edited(
        self, probe: str, result: ProbeResult, payload: tuple[str, str, int]
    ) -> tuple[int, HostFacts] | None:
        """The class and facts of a payload read as an edit of one classed already (by the same
        status), when every edit is at a field of that class's mask: masked, the two are the
        same, so the payload is of that class. None: it is classed as any other."""
        for edits in self._edits:  # each holds its payloads: an id found is this payload's
            edit = edits.get(payload[2])
            if edit is not None:
                break
        else:
            return None
        _, edited, paths = edit
        earlier = (probe, result.status, id(edited))
        kind = self._classes.get(earlier)
        if kind is None or kind[1] is None or not self._covers(probe, kind[1], paths):
            return None
        key, facts = self._parts[earlier]
        self._classes[payload] = kind
        return key, self._with_own_measures(probe, result, facts)

    def _covers(self, probe: str, mask: Mask, paths: tuple[tuple[Any, ...], ...]) -> bool:
        """Whether every path is at or below a field `mask` leaves out; asked once per mask and
        set of paths (a run's edits are a few sets of paths, each one tuple: fleet.jsontext)."""
        number = self._masks[probe][mask]
        key = (number, id(paths))
        found = self._covered.get(key)
        if found is None:
            found = self._covered[key] = all(_left_out(self._trees[number], p) for p in paths)
        return found

    def _with_own_measures(self, probe: str, result: ProbeResult, facts: HostFacts) -> HostFacts:
        """A class's facts with this result's own measurements (the class's own facts where
        they are the same, or there are none)."""
        measures = self._measurements(probe, result.data)
        if measures == facts.measures:
            return facts
        return HostFacts(facts.values, facts.sets, measures, facts.hardware)

    def _measurements(self, probe: str, data: Mapping[str, Any]) -> dict[str, float]:
        """measurements(probe, data); none when this cache reads none."""
        return measurements(probe, data) if self.measure else {}

    def _remember(
        self, probe: str, result: ProbeResult, mask: Mask, found: tuple[int, HostFacts]
    ) -> PayloadClass | None:
        """Keep the masked dump of a payload just flattened, under its mask (kept once): the
        payloads dumped alike from now on are of its class. None: not kept."""
        masks = self._masks.setdefault(probe, {})
        number = masks.get(mask)
        if number is None:
            if len(masks) >= MAX_MASKS:
                return None
            number = masks[mask] = len(self._trees)
            self._trees.append(mask_tree(mask))
            self._tried[probe].insert(0, number)
        dump = masked_dump(result.data, self._trees[number])
        if dump is None:
            return None
        kind: PayloadClass = (len(self._masked), mask)
        self._masked[(result.status, number, dump)] = (found, kind)
        return kind


def shared_or_own(
    cache: FactCache | None, declarations: Mapping[str, ProbeFacts], measure: bool = True
) -> FactCache:
    """`cache` where it flattens by `declarations` (and reads measurements where asked to),
    else a cache of one's own: the diff, the drift and the rules' judging of one run class its
    payloads once between them (a payload is classed by its masked dump: 60,000 of them at
    20,000 hosts whose hostnames, GPU UUIDs and timings are their own)."""
    usable = cache is not None and (cache.measure or not measure)
    if usable and cache is not None and cache.declarations == declarations:
        return cache
    return FactCache(declarations, measure)


MAX_MASKS = 16  # kinds of payload remembered per probe (2-GPU and 8-GPU hosts mask apart)
Mask = tuple[tuple[Any, ...], ...]  # the fields left out of a payload: the keys down to each
# A class of probe results: its number, and the fields its payloads may differ in (None: the
# class is one payload object, which hosts may share).
PayloadClass = tuple[int, Optional[Mask]]
MASKED = "\x00fleet: left out"
Dump = Union[bytes, str]  # a masked payload dumped (dump_of)
# A mask as a tree: key → the tree below it, or None where the value is left out.
MaskTree = dict[Any, Any]


def mask_tree(mask: Sequence[tuple[Any, ...]]) -> MaskTree:
    """The fields of `mask` (each the keys down to one) as a tree: each container on the way is
    then copied once, and each key looked up once."""
    root: MaskTree = {}
    for keys in mask:
        node = root
        for key in keys[:-1]:
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            node = child
        node[keys[-1]] = None
    return root


def _left_out(tree: MaskTree, path: tuple[Any, ...]) -> bool:
    """Whether the field at `path` is one the mask `tree` leaves out, or inside one."""
    node: MaskTree | None = tree
    for key in path:
        if node is None:
            return True
        if key not in node:
            return False
        node = node[key]
    return node is None


def masked_dump(data: Any, tree: MaskTree) -> Dump | None:
    """`data` with every field of the mask `tree` replaced, dumped (dump_of); None when one of
    the fields is not there."""
    root = _masked_copy(data, tree)
    return None if root is None else dump_of(root)


def dump_of(data: Any) -> Dump:
    """`data` as a key that is equal only for data of the same types, values and order: marshal's
    version 2 (C speed, 2-5× repr: floats are written as their 8 bytes, not formatted; no
    back-references, so equal data is equal bytes whichever objects it shares), else its repr
    (a type marshal does not write; bytes and text never equal: another class, never a wrong one)."""
    try:
        return marshal.dumps(data, MARSHAL_VERSION)
    except ValueError:
        return repr(data)


MARSHAL_VERSION = 2  # the last without references (3 added them): equal data, equal bytes


def _masked_copy(node: Any, tree: MaskTree) -> Any:
    kind = type(node)
    if kind is dict:
        copy: Any = dict(node)
    elif kind is list:
        copy = list(node)
    elif isinstance(node, Mapping):
        copy = dict(node)
    elif isinstance(node, (list, tuple)):
        copy = list(node)
    else:
        return None
    for key, below in tree.items():
        try:
            child = copy[key]
        except (KeyError, IndexError, TypeError):
            return None
        if below is None:
            copy[key] = MASKED
        else:
            masked = _masked_copy(child, below)
            if masked is None:
                return None
            copy[key] = masked
    return copy
