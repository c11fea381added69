"""Saved runs: one JSON file per run, readable only by its owner, written atomically.

Later commands compare runs (drift), so a run is never lost half-written: we write a temp file in
the same folder, fsync it, and rename it over the final name.
"""

from __future__ import annotations

import calendar
import contextlib
import errno
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from fleet.collector import paused
from fleet.errors import StoreError, UsageError
from fleet.files import ensure_private_dir
from fleet.models import (
    READABLE_RUN_SCHEMAS,
    RUN_SCHEMA,
    HostOutcome,
    PayloadEdit,
    ProbeResult,
    Run,
)
from fleet.redact import mask_secrets, might_hold_secret
from fleet.rundoc import (
    StoredPayload,
    compact_pieces,
    payload_digest,
    read_run_document,
    saved_pieces,
)

ALIASES = {"latest": 1, "previous": 2}


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "fleet"


def default_runs_dir() -> Path:
    return default_state_dir() / "runs"


def write_private_json(path: Path, document: dict[str, Any], *, exclusive: bool = False) -> None:
    """Atomically replace `path` with `document` as JSON, mode 0600; with `exclusive`, never
    replace: raise FileExistsError if `path` exists. Compact JSON: the C encoder is
    ~10× faster than indented output on a 1,000-host run (`fleet show` is for reading)."""
    text = json.dumps(document, ensure_ascii=False, default=str)
    if might_hold_secret(text):  # rare: results were masked on the host and on arrival already
        text = json.dumps(mask_secrets(document), ensure_ascii=False, default=str)
    write_private_text(path, [text], exclusive=exclusive)


def write_run_json(path: Path, run: Run) -> None:
    """`run`'s document as write_private_json writes it (`--json FILE`), written a host at a time
    (fleet/rundoc.py): a 20,000-host document is never held whole."""
    write_private_text(path, compact_pieces(run))


def write_private_text(path: Path, pieces: Iterable[str], *, exclusive: bool = False) -> None:
    """Atomically replace `path` with the text of `pieces` and a newline, mode 0600; with
    `exclusive`, never replace: raise FileExistsError if `path` exists."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.writelines(pieces)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o600)
        if exclusive:
            os.link(temp, path)  # atomic, and fails if another run took the name first
            os.unlink(temp)
        else:
            os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def run_file_name(run: Run) -> str:
    stamp = run.started.replace(":", "").replace("-", "").split(".")[0].rstrip("Z")
    return f"{stamp}Z-{run.bundle_sha256[:8]}.json"


# Saved run files store each distinct probe payload once, content-addressed: a probe's "data" is
# replaced by "data_ref": SHA256 into the document's "payloads" table. 1,000 hosts with the same
# dir() dumps hold one copy on disk and, once loaded, one object in memory. `--json` output and
# `fleet.run/1` documents from other tools keep plain "data"; read_run_file reads both.


def deduplicate_payloads(document: dict[str, Any]) -> dict[str, Any]:
    payloads: dict[str, Any] = {}
    for outcome in document["hosts"].values():
        for probe in outcome["probes"].values():
            digest = payload_digest(probe["data"])
            payloads.setdefault(digest, probe.pop("data"))
            probe["data_ref"] = digest
    return {**document, "payloads": payloads}


def expand_payloads(document: dict[str, Any]) -> dict[str, Any]:
    """Each result's "data_ref" replaced by its payload ("data") from the "payloads" table; a
    result read as a ProbeResult (fleet/rundoc.py) gets its payload in place of StoredPayload."""
    payloads = document.pop("payloads", None) or {}
    for outcome in document.get("hosts", {}).values():
        made = type(outcome) is HostOutcome  # by the reader
        for probe in (outcome.probes if made else outcome.get("probes") or {}).values():
            if type(probe) is ProbeResult:
                stored: Any = probe.data
                if type(stored) is StoredPayload:  # made by the reader, seen by no one yet
                    object.__setattr__(probe, "data", payloads[stored.ref] or {})  # as from_dict
            elif "data_ref" in probe:
                probe["data"] = payloads[probe.pop("data_ref")]  # shared, not copied
    return document


def save_run(run: Run, runs_dir: Path) -> Path:
    try:
        ensure_private_dir(runs_dir)
        name = run_file_name(run)
        for attempt in range(1, 100):  # two runs started in the same second: both are kept
            path = runs_dir / (name if attempt == 1 else f"{name[:-5]}_{attempt}.json")
            with contextlib.suppress(FileExistsError):
                write_private_text(path, saved_pieces(run), exclusive=True)
                break
        else:
            raise OSError(errno.EEXIST, "too many runs started in the same second")
    except OSError as exc:
        raise StoreError(
            f"cannot save the run in {runs_dir}: {exc.strerror}",
            hint="pass a writable folder with --runs-dir",
        ) from exc
    return path


def list_runs(runs_dir: Path) -> list[Path]:
    """Saved runs, oldest first (file names start with the UTC start time; runs started in the
    same second in the order they were saved: `_2` after the plain name, `_10` after `_9`)."""
    if not runs_dir.is_dir():
        return []
    return sorted(
        (p for p in runs_dir.glob("*.json") if not p.name.startswith(".")), key=_saved_order
    )


SAME_SECOND = re.compile(r"^(.*)_(\d+)$")


def _saved_order(path: Path) -> tuple[str, int, str]:
    found = SAME_SECOND.match(path.stem)
    return (found.group(1), int(found.group(2)), path.name) if found else (path.stem, 1, path.name)


def resolve_run(ref: str, runs_dir: Path, inventory: str | None = None) -> Path:
    """`latest`, `previous`, a file path, or a saved run's file name (or unique prefix).

    `latest:INV` / `previous:INV` (or `inventory=INV`) count only the runs of inventory INV: its
    path as given when probing, its file name, or its name without `.yaml` (`latest:blackwell`
    for inventory/blackwell.yaml; `local` for the built-in local inventory)."""
    counted = alias_runs(ref, runs_dir, inventory)
    if counted is not None:
        back, runs = counted
        if len(runs) < back:
            raise no_alias_run(ref, runs_dir, inventory)
        return runs[-back]
    if Path(ref).is_file():
        return Path(ref)
    runs = list_runs(runs_dir)
    exact = [p for p in runs if ref in (p.stem, p.name)]  # an id always names its run: `_2` too
    if exact:
        return exact[0]
    matches = [p for p in runs if p.name.startswith(ref)]
    if len(matches) > 1:
        newest = [p.stem for p in reversed(matches)]
        more = (
            f" and {len(newest) - SHOWN_CANDIDATES} more" if len(newest) > SHOWN_CANDIDATES else ""
        )
        raise StoreError(
            f"{len(matches)} saved runs match {ref!r} in {runs_dir}",
            context=", ".join(newest[:SHOWN_CANDIDATES]) + more,
            hint="give more of the name (newest first above), or a path",
        )
    if not matches:
        raise StoreError(
            f"no saved run matches {ref!r} in {runs_dir}",
            hint="use latest, previous, latest:INVENTORY, a path, or a name from `fleet runs`",
        )
    return matches[0]


SHOWN_CANDIDATES = 10  # an ambiguous prefix: the newest runs it matches, named


def alias_runs(
    ref: str, runs_dir: Path, inventory: str | None = None
) -> tuple[int, list[Path]] | None:
    """For `latest`/`previous` (`latest:INV` scoped): how far back it counts (1, 2) and the runs
    it counts among, oldest first (those of INV, else of `inventory`); None for any other ref."""
    alias, _, scope = ref.partition(":")
    if alias not in ALIASES or not (scope or ":" not in ref):
        return None
    runs = list_runs(runs_dir)
    wanted = scope or inventory
    return ALIASES[alias], _runs_of_inventory(runs, wanted, runs_dir) if wanted else runs


def no_alias_run(ref: str, runs_dir: Path, inventory: str | None = None) -> StoreError:
    alias, _, scope = ref.partition(":")
    wanted = scope or inventory
    of = f" of {source_words(wanted)}" if wanted else ""
    return StoreError(
        f"there is no {alias} run{of} in {runs_dir}",
        hint="run `fleet probe` first, or pass --runs-dir (`fleet runs` lists them)",
    )


def _runs_of_inventory(runs: list[Path], wanted: str, runs_dir: Path) -> list[Path]:
    """The runs of inventory `wanted`. Those recorded with `wanted` itself (the same string, or
    the same file) come first; a file name or stem that two different inventories share is
    refused, naming both, rather than one of them picked."""
    recorded = {path: run_inventory(path) for path in runs}
    matching = [p for p in runs if inventory_matches(recorded[p], wanted)]
    exact = [p for p in matching if _same_inventory(recorded[p], wanted)]
    if exact:
        return exact
    named = {_inventory_key(recorded[p]): recorded[p] for p in matching}
    if len(named) > 1:
        raise StoreError(
            f"{wanted!r} names {len(named)} different inventories in {runs_dir}",
            context=", ".join(sorted(str(name) for name in named.values())),
            hint="give the inventory's path, e.g. latest:PATH (or -i PATH)",
        )
    return matching


def _inventory_key(stored: str | None) -> str:
    if stored is None or stored == BUILT_IN_LOCAL:
        return str(stored)
    return str(Path(stored).expanduser().resolve())


def _same_inventory(stored: str | None, wanted: str) -> bool:
    """`wanted` is the recorded inventory itself: the same string, or a file that is it."""
    if stored == wanted:
        return True
    path = Path(wanted).expanduser()
    return (
        stored not in (None, BUILT_IN_LOCAL)
        and path.is_file()
        and _inventory_key(stored) == str(path.resolve())
    )


BUILT_IN_LOCAL = "<built-in local inventory>"
ADHOC = "-H "  # how a run of -H NODESET records where its hosts came from (inventory/adhoc.py)


def source_words(source: str | None) -> str:
    """Where a run's hosts came from, as a sentence names it: `inventory inv/lab.yaml`, `hosts
    -H gpu-[01-04]` (a nodeset is no inventory), `this machine`."""
    if source is None:
        return "an unrecorded inventory"
    if source == BUILT_IN_LOCAL:
        return "this machine (the built-in local inventory)"
    return f"hosts {source}" if source.startswith(ADHOC) else f"inventory {source}"


HEADER_BYTES = 64 * 1024
INVENTORY_FIELD = re.compile(r'"inventory":\s*')


def run_inventory(path: Path) -> str | None:
    """The inventory a saved run was probed from, read from the file's first bytes (a saved run
    writes it before its hosts), so scoping `latest` to an inventory does not load every run."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(HEADER_BYTES)
        found = INVENTORY_FIELD.search(head)
        if found:
            value, _ = json.JSONDecoder().raw_decode(head, found.end())
            return value if isinstance(value, str) else None
        return read_run_file(path).inventory
    except (OSError, ValueError, StoreError):
        return None


def inventory_matches(stored: str | None, wanted: str) -> bool:
    """Whether a run's recorded inventory is `wanted`: the same path, file name or stem."""
    if stored is None:
        return False
    if stored == BUILT_IN_LOCAL:
        return wanted in ("local", "local.yaml", BUILT_IN_LOCAL)
    stored_path, wanted_path = Path(stored), Path(wanted)
    return (
        stored == wanted
        or wanted in (stored_path.name, stored_path.stem)
        or stored_path.expanduser().resolve() == wanted_path.expanduser().resolve()
    )


# ---------------------------------------------------------------------------------- pruning

DURATION = re.compile(r"^(\d+)([smhdw])$")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """`30d`, `12h`, `2w`, `90m`, `45s` → seconds."""
    found = DURATION.match(text.strip())
    if not found:
        raise UsageError(
            f"{text!r} is not a duration", hint="a number and a unit: 45s, 90m, 12h, 30d, 2w"
        )
    return int(found.group(1)) * SECONDS[found.group(2)]


def run_started(path: Path) -> float:
    """When a saved run started (seconds since the epoch): from its file name (UTC), else the
    file's modification time."""
    try:
        return float(calendar.timegm(time.strptime(path.name[:16], "%Y%m%dT%H%M%SZ")))
    except ValueError:
        return path.stat().st_mtime


def runs_to_prune(
    runs: list[Path], keep: int | None, older_than_s: float | None, now: float
) -> list[Path]:
    """Saved runs (oldest first) beyond the `keep` newest, or started more than `older_than_s`
    ago; with both, a run goes when either says so."""
    doomed = set(runs[: max(0, len(runs) - keep)] if keep is not None else [])
    if older_than_s is not None:
        doomed |= {p for p in runs if now - run_started(p) > older_than_s}
    return [p for p in runs if p in doomed]


def prune_runs(
    runs_dir: Path, keep: int | None, older_than_s: float | None, dry_run: bool = False
) -> list[Path]:
    """Delete (unless `dry_run`) the runs runs_to_prune picks; returns them."""
    doomed = runs_to_prune(list_runs(runs_dir), keep, older_than_s, time.time())
    for path in [] if dry_run else doomed:
        try:
            path.unlink()
        except FileNotFoundError:
            continue  # another prune got there first
        except OSError as exc:
            raise StoreError(f"cannot delete {path}: {exc.strerror}") from exc
    return doomed


NOT_A_RUN = (
    "pass a run: a saved run (`fleet runs` lists them) or a file `fleet probe --json` or "
    "`fleet fabric --json` wrote; diff and check documents are not runs"
)


def read_run_file(path: Path) -> Run:
    """A run document from a file (fleet.api.load_run finds it from a name or `latest`): a saved run (payloads stored once) or plain `--json` output,
    of any run id this fleet reads (READABLE_RUN_SCHEMAS; a document without `schema` is read
    too). Anything else is a StoreError that names what the file is and what to do."""
    try:
        with paused(), path.open(encoding="utf-8") as handle:  # paused: fleet.collector
            read, waiting, edits = _json_of(handle, path)  # payloads shared: rundoc
            document = readable_run(read, path)
            if waiting:
                expand_payloads(document)
            else:  # every payload in its result already
                document.pop("payloads", None)
            return Run.from_dict(document, edits)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(
            f"cannot read run {path}: {exc}", hint=f"is it a fleet run document ({RUN_SCHEMA})?"
        ) from exc


def readable_run(document: Any, path: Path) -> dict[str, Any]:
    """`document` if it is a run this fleet can read; otherwise a StoreError naming its id."""
    if not isinstance(document, dict):
        kind = type(document).__name__
        raise StoreError(f"cannot read run {path}: it is a JSON {kind}, not a run", hint=NOT_A_RUN)
    schema = document.get("schema")
    if schema in READABLE_RUN_SCHEMAS:
        return document
    if schema is None:  # older runs have no id: a run is a mapping with hosts
        if isinstance(document.get("hosts"), dict):
            return document
        raise StoreError(
            f"cannot read run {path}: it is not a fleet run document (no schema and no hosts)",
            hint=NOT_A_RUN,
        )
    readable = ", ".join(READABLE_RUN_SCHEMAS)
    shown = schema if isinstance(schema, str) else repr(schema)
    version = str(schema).rpartition("/")[2]
    if str(schema).startswith("fleet.run/") and version.isdigit():
        newer = int(version) > int(RUN_SCHEMA.rpartition("/")[2])
        raise StoreError(
            f"cannot read run {path}: it is a {schema} document and this fleet reads {readable}",
            hint="it was written by a newer fleet: upgrade fleet to read it"
            if newer
            else "no fleet wrote that id: docs/documents.md lists the run ids",
        )
    raise StoreError(
        f"cannot read run {path}: it is a {shown} document, not a run ({readable})",
        hint=NOT_A_RUN,
    )


# A baseline file (fleet.baseline/N) is YAML, and starts with its id (fleet baseline writes it).
BASELINE_ID = re.compile(r"^schema:\s*['\"]?(fleet\.baseline/\d+)", re.MULTILINE)


def _json_of(handle: TextIO, path: Path) -> tuple[Any, bool, Mapping[int, PayloadEdit]]:
    """The JSON in a run file, read a host at a time (fleet/rundoc.py read_run_document: with
    whether its payloads are still to be put in, and those read as edits); an empty file, or a
    baseline file (YAML) handed where a run goes, is named as one, with the flag that takes it,
    rather than as the JSON parser's complaint."""
    try:
        return read_run_document(handle)
    except ValueError as exc:
        handle.seek(0)
        head = handle.read(HEADER_BYTES)
        if not head.strip():
            raise StoreError(f"cannot read run {path}: the file is empty", hint=NOT_A_RUN) from exc
        baseline = BASELINE_ID.search(head)
        if baseline is None:
            raise
        raise StoreError(
            f"cannot read run {path}: it is a baseline file ({baseline.group(1)}), not a run",
            hint=f"judge against a baseline file with --baseline-file {path} (fleet probe, "
            "check, diff, report); --baseline takes a saved run",
        ) from exc
