"""Run documents read and written a host at a time.

Reading: a plain run document (`fleet probe --json`, every host's payloads written out in full)
is decoded host by host from a buffer of about a megabyte, and each probe payload is shared by
its content as soon as its host is read: hosts that reported equal payloads hold one object, as
a saved run's do (fleet/store.py stores each distinct payload once), so both forms cost the same
in every command, and neither the document's text nor a second copy of its payloads is ever held
whole. Payloads are told apart by their text as written (its SHA256): fleet writes a payload's
keys in the order its host sent them, sorted, so equal payloads are equal text in a document
fleet wrote (a payload written otherwise is still read right, only not shared). A host laid out
as fleet writes one is matched by a few regular expressions (its own members, then two per
probe result) instead of member by member; any other layout (indented, hand-edited) falls back
to the member-by-member reading, to the same result. In the fleet executable, the run read
second (drift's other run, a baseline) shares the payloads equal to the first's (LAST_READ).

Writing: the compact document (`--json FILE`, a saved run) and the indented one (`--json -`) are
made a host at a time, the same text as one json.dumps of the whole document, never held whole.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import IO, Any, NoReturn

from fleet.collector import in_executable
from fleet.jsontext import DECODER, KEY, SCAN, SPACE, EditedDecoder, Members, write_indented
from fleet.models import HOST_STATUSES, HostOutcome, PayloadEdit, ProbeResult, Run
from fleet.redact import mask_secrets, might_hold_secret

CHUNK = 1 << 20  # characters read at a time
Parse = Callable[[str, int], tuple[Any, int]]


class _Text:
    """A file's text read a chunk at a time, its JSON values decoded one by one."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.buffer = ""
        self.at = 0  # where the next value starts in buffer
        self.dropped = 0  # characters of the file before buffer[0], for error positions
        self.ended = False

    def more(self) -> bool:
        """Read on (at least as much as is left: a value bigger than a chunk costs doublings,
        not a re-read per chunk); False at the end of the file."""
        chunk = "" if self.ended else self.handle.read(max(CHUNK, len(self.buffer) - self.at))
        self.dropped += self.at
        self.buffer = self.buffer[self.at :] + chunk
        self.at = 0
        self.ended = not chunk
        return not self.ended

    def peek(self) -> str:
        """The next character that is not white space ("" at the end), left unread."""
        while True:
            self.at = SPACE.match(self.buffer, self.at).end()  # type: ignore[union-attr]
            if self.at < len(self.buffer) or not self.more():
                return self.buffer[self.at : self.at + 1]

    def take(self, expected: str) -> str:
        """The next character, which must be one of `expected`."""
        found = self.peek()
        if not found or found not in expected:
            shown = repr(found) if found else "the end of the file"
            raise ValueError(
                f"expected one of {expected!r} at character {self.where()}, not {shown}"
            )
        self.at += 1
        return found

    def value(self, parse: Parse = DECODER.raw_decode, room: int = 0) -> Any:
        """The next JSON value as `parse(buffer, at)` reads it ((value, end); raw_decode's by
        default), read on until the buffer holds all of it. `room`: read on first until the
        buffer holds that many characters from the value on (or the file ends), so that a value
        usually shorter is rarely cut short (a parse is then started again)."""
        self.peek()
        while len(self.buffer) - self.at < room and self.more():
            pass
        while True:
            try:
                value, end = parse(self.buffer, self.at)
            except (IndexError, StopIteration, ValueError) as exc:
                if self.more():
                    continue  # cut short by the end of the buffer
                self._say_why(exc)
            if end == len(self.buffer) and self.more():
                continue  # a number or literal may go on in the next chunk
            self.at = end
            return value

    def _say_why(self, exc: BaseException) -> NoReturn:
        """What is wrong at the end of the file, as json.loads says it, with its place."""
        try:
            DECODER.raw_decode(self.buffer, self.at)
        except json.JSONDecodeError as wrong:
            what = wrong.msg.removesuffix(" at")  # "Invalid control character at"
            raise ValueError(f"{what} at character {self.dropped + wrong.pos}") from exc
        raise ValueError(f"not a run document at character {self.where()}") from exc

    def where(self) -> int:
        return self.dropped + self.at


def read_document(handle: IO[str]) -> Any:
    """The JSON document in `handle`; a run's probe payloads shared by content (module doc)."""
    return _read(handle, Payloads(LAST_READ[0] if LAST_READ else None))


def read_run_document(handle: IO[str]) -> tuple[Any, bool, Mapping[int, PayloadEdit]]:
    """read_document's document, its hosts laid out as fleet writes them read straight into
    HostOutcome and ProbeResult objects (Run.from_dict takes them as they are; a host of a
    status this fleet does not know stays a document, for from_dict to refuse in its turn);
    whether a result still waits for its payload from the "payloads" table (a saved run's,
    or a host read member by member): fleet.store.expand_payloads puts them in; and, in the
    executable, the payloads decoded as edits of others (Run.payload_edits: the fact cache
    classes them by what they edit, which holds while no one changes them, as for LAST_READ)."""
    payloads = Payloads(LAST_READ[0] if LAST_READ else None, results=True)
    document = _read(handle, payloads)
    return document, payloads.waiting, payloads.edits.edits if in_executable() else {}


def _read(handle: IO[str], payloads: Payloads) -> Any:
    text = _Text(handle)
    # not an object: not a run, read whole for the caller to say what it is
    is_object = text.peek() == "{"
    document = _read_object(text, _run_member(payloads)) if is_object else text.value()
    if text.peek():
        raise ValueError(f"extra data at character {text.where()}")
    if in_executable():
        LAST_READ[:] = [payloads]
    return document


# The payloads of the last run document the fleet executable read, and only those: the run it
# reads next (drift's other run, a baseline) holds the payloads equal to them as the same
# objects, so that the fact cache classes them once for both runs, and they are held once. Only
# in the executable, which changes no payload it read: fleet called in-process (tests, the API)
# reads each document on its own, as its callers may change a run they read.
LAST_READ: list[Payloads] = []


def _read_object(text: _Text, read: Callable[[_Text, str], Any]) -> dict[str, Any]:
    """An object, each member's value read by `read(text, key)`."""
    members: dict[str, Any] = {}
    text.take("{")
    if text.peek() == "}":
        text.at += 1
        return members
    while True:
        key = text.value()
        if not isinstance(key, str):
            raise ValueError(f"an object key must be a string, at character {text.where()}")
        text.take(":")
        members[key] = read(text, key)
        if text.take(",}") == "}":
            return members


def _run_member(payloads: Payloads) -> Callable[[_Text, str], Any]:
    def member(text: _Text, key: str) -> Any:
        if key == "hosts" and text.peek() == "{":
            # a host cut short by the buffer's end costs its layout's reading, the reading
            # member by member, and a JSONDecodeError (which counts the buffer's lines) before
            # it is read again: read on first while less than a quarter chunk is left (most
            # hosts are a few KB)
            return _read_object(
                text, lambda text, name: text.value(payloads.host(name), CHUNK >> 2)
            )
        if key == "payloads" and text.peek() == "{":  # a saved run's: a payload at a time
            return _read_object(
                text, lambda text, digest: payloads.stored(digest, text.value(payloads.in_table))
            )
        return text.value()

    return member


class StoredPayload:
    """A saved run's result read as a ProbeResult before its payload (the run's "payloads" table
    comes after its hosts): the payload's "data_ref", until fleet.store.expand_payloads puts
    the payload in its place."""

    __slots__ = ("ref",)

    def __init__(self, ref: str) -> None:
        self.ref = ref


Member = Callable[[str, int, str], tuple[Any, int]]


def _space(text: str, at: int) -> int:
    return SPACE.match(text, at).end()  # type: ignore[union-attr]


class Payloads:
    """Each distinct probe payload once, found by its text: a host's object is parsed member by
    member down to its probes' results, each result's "data" decoded from its span of the text,
    and a span seen before (its SHA256) gives the object decoded the first time. fleet writes a
    payload's keys in the order the host sent them, sorted (probes/runner/_host_runner.py), so equal
    payloads are equal text (the saved form keys them by their text with keys sorted)."""

    def __init__(self, earlier: Payloads | None = None, results: bool = False) -> None:
        """`earlier`: the payloads of a document read before, whose equal payloads this one's
        are (LAST_READ); this table keeps only its own document's. `results`: a host laid out
        as fleet writes it is read as a HostOutcome (its status known) and its results as
        ProbeResults, not as documents (a saved run's results with their payloads to come:
        StoredPayload)."""
        self.results = results
        self.waiting = False  # a result waits for its payload from the "payloads" table
        self.seen: dict[bytes, Any] = {}
        self.refs: dict[str, Any] = {}  # a saved run's payloads, by their "data_ref"
        self.earlier_seen = earlier.seen if earlier else {}
        self.earlier_refs = earlier.refs if earlier else {}
        # names, probe names and statuses: one string each (a handful, kept from one to the next)
        self.keys: dict[str, str] = earlier.keys if earlier else {}
        # a payload decoded as an edit of an earlier one of its probe (fleet.jsontext): the
        # earlier document's too, as for `earlier_seen`
        self.edits: EditedDecoder = earlier.edits if earlier else EditedDecoder()

    def stored(self, ref: str, payload: Any) -> Any:
        """A saved run's payload (its table's member `ref`), the earlier document's object if
        that is equal to it."""
        earlier = self.earlier_refs.get(ref)
        found = earlier if earlier is not None and earlier == payload else payload
        self.refs[ref] = found
        return found

    def in_table(self, text: str, at: int) -> tuple[Any, int]:
        """A payload of a saved run's table at text[at], decoded as an edit of an earlier one
        like it where it can be (its text up to the next member's key, as fleet writes the table:
        a span that is not one value there is decoded plainly)."""
        after = NEXT_STORED.search(text, at) if text[at] in "{[" else None
        if after is not None:
            piece = text[at : after.start()]
            try:  # the kind of payload: its first keys
                return self.edits.decode(piece, piece[:KIND_CHARACTERS]), after.start()
            except ValueError:
                pass
        return SCAN(text, at)

    def _seen(self, digest: bytes) -> Any:
        """The payload whose text has SHA256 `digest`, from this document or the earlier one;
        None if neither had it."""
        found = self.seen.get(digest)
        if found is None:
            found = self.earlier_seen.get(digest)
            if found is not None:
                self.seen[digest] = found
        return found

    def host(self, name: str) -> Parse:
        """How to read host `name`'s object at text[at], its probes' payloads shared: as fleet
        writes a host, by a few regular expressions (_fleet_host); written otherwise, a member
        at a time."""

        def read_host(text: str, at: int) -> tuple[Any, int]:
            if text[at] != "{":
                return SCAN(text, at)
            found = self._fleet_host(text, at, name)
            if found is None:
                self.waiting = True  # its results are documents: one may refer to the table
                return self._object(text, at, self._host_member)
            return found

        return read_host

    def _fleet_host(self, text: str, at: int, name: str) -> tuple[Any, int] | None:
        """The host at text[at] if it is laid out as HostOutcome.to_dict and json.dumps write
        it (plain or saved form), read by one match for its own members and two per probe
        rather than a match, a decode and a call per member (`results`: as a HostOutcome, when
        its status is one fleet knows); None if it is laid out otherwise."""
        head = HOST_HEAD.match(text, at)
        if head is None:
            return None
        probes: dict[str, Any] = {}
        members = (
            _string(head[1]),
            _nullable(head[2]),
            _nullable(head[3]),
            _string(head[4]),
            _number(head[5]),
            _nullable(head[6]),
        )
        host: Any
        if self.results and members[0] in HOST_STATUSES:
            host = HostOutcome.read(name, *members, probes)
        else:
            host = dict(zip(HOST_MEMBERS, (*members, probes)))
        at = head.end()
        if text.startswith("}}", at):
            return host, at + 2
        while True:
            found = self._fleet_result(text, at, probes)
            if found is None:
                return None
            at, last = found
            if last:
                return host, at

    def _fleet_result(self, text: str, at: int, probes: dict[str, Any]) -> tuple[int, bool] | None:
        """One probe's result (ProbeResult.to_dict) into `probes`, as its document or (`results`)
        as a ProbeResult: where it ends and whether it was the host's last; None if it is laid
        out otherwise."""
        head = RESULT_HEAD.match(text, at)
        if head is None:
            return None
        at = head.end()
        plain = text.startswith('"data": ', at)
        data: Any = None
        if plain:
            data, at = self._payload(text, at + 8, head[1])
        tail = (RESULT_TAIL if plain else SAVED_TAIL).match(text, at)
        if tail is None:
            return None
        keys = self.keys
        status, name = _string(head[2]), _string(head[1])
        status = keys.setdefault(status, status)
        ok = head[3] == "true"
        error, elapsed_s, output_tail = _nullable(tail[1]), _number(tail[2]), _string(tail[3])
        traceback = None if tail[4] is None else _string(tail[4])
        result: Any
        if self.results:
            if not plain:
                data = StoredPayload(_string(tail[5]))
                self.waiting = True
            result = ProbeResult.read(status, ok, data, error, elapsed_s, output_tail, traceback)
        else:
            result = {"status": status, "ok": ok, **({"data": data} if plain else {})}
            result.update(error=error, elapsed_s=elapsed_s, output_tail=output_tail)
            if traceback is not None:
                result["traceback"] = traceback
            if not plain:
                result["data_ref"] = _string(tail[5])
        probes[keys.setdefault(name, name)] = result
        return tail.end(), tail[6] == "}}"

    def _host_member(self, text: str, at: int, key: str) -> tuple[Any, int]:
        if key == "probes" and text[at] == "{":
            return self._object(text, at, self._probe)
        return SCAN(text, at)

    def _probe(self, text: str, at: int, name: str) -> tuple[Any, int]:
        if text[at] == "{":
            return self._object(text, at, self._result_member)
        return SCAN(text, at)

    def _result_member(self, text: str, at: int, key: str) -> tuple[Any, int]:
        if key == "data":
            return self._payload(text, at)
        value, end = SCAN(text, at)
        if key == "status" and isinstance(value, str):
            value = self.keys.setdefault(value, value)
        return value, end

    def _payload(self, text: str, at: int, probe: str = "") -> tuple[Any, int]:
        """A result's "data": a payload seen before is found by its text without decoding it
        again (where it ends is found as fleet writes a result: "error", then "elapsed_s"), one
        not seen before decoded as an edit of an earlier one of probe `probe` where it can be."""
        known = _known_end(text, at)
        digest = b""
        if known > 0:
            piece = text[at:known]
            digest = hashlib.sha256(piece.encode()).digest()
            seen = self._seen(digest)
            if seen is not None:
                return seen, known
            try:
                return self.seen.setdefault(digest, self.edits.decode(piece, probe)), known
            except ValueError:
                pass  # not one value up to there: where it ends is found by decoding it
        value, end = SCAN(text, at)
        if end != known:  # not where fleet's layout says: its own text's digest
            digest = hashlib.sha256(text[at:end].encode()).digest()
            seen = self._seen(digest)
            if seen is not None:
                return seen, end
        return self.seen.setdefault(digest, value), end

    def _object(self, text: str, at: int, member: Member) -> tuple[dict[str, Any], int]:
        """The object at text[at] ("{"), each member's value read by `member(text, at, key)`;
        an IndexError or ValueError where the text ends first (the caller reads on)."""
        found: dict[str, Any] = {}
        at = _space(text, at + 1)
        if text[at] == "}":
            return found, at + 1
        keys = self.keys
        plain = KEY.match(text, at)  # a key without escapes and its ':', in one match
        key, at = (plain.group(1), plain.end()) if plain else _key(text, at)
        while True:
            key = keys.setdefault(key, key)
            found[key], at = member(text, at, key)
            after = MORE.match(text, at)  # the next such key, or the end, in one match
            if after is None:
                key, at = _key(text, _comma(text, at))  # a key with escapes
            elif after.lastindex == 1:
                key, at = after.group(1), after.end()
            else:
                return found, after.end()


NEXT_STORED = re.compile(r', "[0-9a-f]{64}": ')  # a saved run's payload table: the next key
KIND_CHARACTERS = 24  # of a stored payload's text, to tell its probe (`{"command_errors": {}, "`)

HOST_MEMBERS = ("status", "error", "hint", "address", "elapsed_s", "python", "probes")
# A host and its results as fleet writes them (HostOutcome.to_dict, ProbeResult.to_dict, then
# json.dumps with its default separators): JSON strings, numbers and null exactly as json reads
# them, so that a match decodes to what the member-by-member reading gives.
STRING = r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"'
NULLABLE = rf"null|{STRING}"
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
HOST_HEAD = re.compile(
    rf'\{{"status": ({STRING}), "error": ({NULLABLE}), "hint": ({NULLABLE}), '
    rf'"address": ({STRING}), "elapsed_s": ({NUMBER}), "python": ({NULLABLE}), "probes": \{{'
)
RESULT_HEAD = re.compile(rf'({STRING}): \{{"status": ({STRING}), "ok": (true|false), ')
_RESULT_REST = (
    rf'"error": ({NULLABLE}), "elapsed_s": ({NUMBER}), "output_tail": ({STRING})'
    rf'(?:, "traceback": ({STRING}))?'
)
RESULT_TAIL = re.compile(rf", {_RESULT_REST}()\}}(, |\}}\}})")  # after a plain run's "data"
SAVED_TAIL = re.compile(rf'{_RESULT_REST}, "data_ref": ({STRING})\}}(, |\}}\}})')


def _string(literal: str) -> str:
    """A JSON string literal matched by STRING, decoded."""
    return literal[1:-1] if "\\" not in literal else json.loads(literal)


def _nullable(literal: str) -> str | None:
    return None if literal == "null" else _string(literal)


def _number(literal: str) -> int | float:
    """A JSON number matched by NUMBER, as json reads it: an int unless it has a fraction or an
    exponent."""
    return float(literal) if "." in literal or "e" in literal or "E" in literal else int(literal)


MORE = re.compile(r'[ \t\n\r]*(?:,[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*|(}))')


def _comma(text: str, at: int) -> int:
    """Past the ',' (and white space) after a member, where the next key starts."""
    at = _space(text, at)
    if text[at] != ",":
        raise ValueError("expected ',' or '}'")
    return _space(text, at + 1)


# What follows a result's "data" as fleet writes it (ProbeResult.to_dict: status, ok, data, error,
# elapsed_s): inside a payload, whose keys are sorted, "error" is never followed by "elapsed_s".
AFTER_DATA = re.compile(r'"error": (?:null|"(?:[^"\\]|\\.)*"),[ \t\n\r]*"elapsed_s": ')
SPACES = " \t\n\r"
NO_ERROR = '"error": null, "elapsed_s": '  # AFTER_DATA as fleet writes a result without one


def _known_end(text: str, at: int) -> int:
    """Where the object or list at text[at] ends if it is followed as fleet writes a result's
    "data"; -1 if not found. Only a hint: the caller takes it only when the text up to it is a
    payload already decoded, and a whole JSON object or list is never a proper prefix of one
    value, nor a value and more, so such a span ends right here."""
    if text[at] not in "{[":
        return -1
    # most results have no error: found as plain text (str.find), not by a regular expression
    start = text.find(NO_ERROR, at)
    if start < 0:
        found = AFTER_DATA.search(text, at)
        if found is None:
            return -1
        start = found.start()
    if text.startswith(", ", start - 2) and text[start - 3] in "}]":  # as fleet writes it
        return start - 2
    end = _before_space(text, start)
    if text[end - 1] != ",":
        return -1
    return _before_space(text, end - 1)


def _before_space(text: str, end: int) -> int:
    """`end`, moved back over the white space before it."""
    while end > 0 and text[end - 1] in SPACES:
        end -= 1
    return end


def _key(text: str, at: int) -> tuple[str, int]:
    """A key with escapes in it, and where its value starts."""
    if text[at] != '"':
        raise ValueError("an object key must be a string")
    key, at = SCAN(text, at)
    at = _space(text, at)
    if text[at] != ":":
        raise ValueError("expected ':'")
    return key, _space(text, at + 1)


# ------------------------------------------------------------------------------------- writing


def compact_pieces(run: Run) -> Iterator[str]:
    """`json.dumps(run.to_dict(), ensure_ascii=False, default=str)` a host at a time, each piece
    masked (fleet.redact) when it may hold a secret, as the whole text was."""
    hosts = ((name, outcome.to_dict()) for name, outcome in run.hosts.items())
    return _object_pieces(_members(run, hosts))


def saved_pieces(run: Run) -> Iterator[str]:
    """The saved form (fleet/store.py): each probe's "data" replaced by "data_ref", the SHA256 of
    its canonical text, into a "payloads" table written after the hosts, each payload once."""
    payloads: dict[str, Any] = {}

    def hosts() -> Iterator[tuple[str, Any]]:
        for name, outcome in run.hosts.items():
            document = outcome.to_dict()
            for result in document["probes"].values():
                data = result.pop("data")
                result["data_ref"] = digest = payload_digest(data)
                payloads.setdefault(digest, data)
            yield name, document

    members = _members(run, hosts())
    members.append(("payloads", Members(lambda: iter(payloads.items()))))
    return _object_pieces(members)


def payload_digest(data: Any) -> str:
    """A payload's content: the SHA256 of its canonical text (the saved form's "data_ref")."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def write_indented_run(run: Run, write: Callable[[str], Any]) -> None:
    """`json.dumps(run.to_dict(), indent=2)` and a newline (`--json -`), a host at a time."""
    hosts = ((name, outcome.to_dict()) for name, outcome in run.hosts.items())
    members = _members(run, hosts)
    write_indented(Members(lambda: iter(members)), write)


def _members(run: Run, hosts: Iterator[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The run document's members in order, "hosts" made a host at a time as it is written."""
    head = replace(run, hosts={}).to_dict()
    return [
        (key, Members(lambda: hosts) if key == "hosts" else value) for key, value in head.items()
    ]


def _object_pieces(members: Iterable[tuple[str, Any]]) -> Iterator[str]:
    separator = "{"
    for key, value in members:
        if isinstance(value, Members):
            yield f"{separator}{json.dumps(key, ensure_ascii=False)}: "
            yield from _object_pieces(value.members())
        else:
            yield separator + _member_text(key, value)
        separator = ", "
    yield "{}" if separator == "{" else "}"


def _member_text(key: str, value: Any) -> str:
    text = _dumped(key, value)
    if might_hold_secret(text):  # rare: results were masked on the host and on arrival already
        text = _dumped(mask_secrets(key), mask_secrets(value))
    return text


def _dumped(key: str, value: Any) -> str:
    return f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False, default=str)}"
