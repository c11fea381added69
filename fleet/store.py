"""Saved runs: one JSON file per run, readable only by its owner, written atomically.

Later commands compare runs (drift), so a run is never lost half-written: we write a temp file in
the same folder, fsync it, and rename it over the final name.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from fleet.errors import StoreError
from fleet.files import ensure_private_dir
from fleet.models import Run
from fleet.redact import mask_secrets, might_hold_secret

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
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text + "\n")
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
# `fleet.run/1` documents from other tools keep plain "data"; load_run reads both.


def deduplicate_payloads(document: dict[str, Any]) -> dict[str, Any]:
    payloads: dict[str, Any] = {}
    for outcome in document["hosts"].values():
        for probe in outcome["probes"].values():
            text = json.dumps(probe["data"], sort_keys=True, separators=(",", ":"), default=str)
            digest = hashlib.sha256(text.encode()).hexdigest()
            payloads.setdefault(digest, probe.pop("data"))
            probe["data_ref"] = digest
    return {**document, "payloads": payloads}


def expand_payloads(document: dict[str, Any]) -> dict[str, Any]:
    payloads = document.pop("payloads", None) or {}
    for outcome in document.get("hosts", {}).values():
        for probe in (outcome.get("probes") or {}).values():
            if "data_ref" in probe:
                probe["data"] = payloads[probe.pop("data_ref")]  # shared, not copied
    return document


def save_run(run: Run, runs_dir: Path) -> Path:
    try:
        ensure_private_dir(runs_dir)
        document = deduplicate_payloads(run.to_dict())
        name = run_file_name(run)
        for attempt in range(1, 100):  # two runs started in the same second: both are kept
            path = runs_dir / (name if attempt == 1 else f"{name[:-5]}_{attempt}.json")
            with contextlib.suppress(FileExistsError):
                write_private_json(path, document, exclusive=True)
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
    """Saved runs, oldest first (file names start with the UTC start time)."""
    if not runs_dir.is_dir():
        return []
    return sorted(p for p in runs_dir.glob("*.json") if not p.name.startswith("."))


def resolve_run(ref: str, runs_dir: Path) -> Path:
    """`latest`, `previous`, a file path, or a saved run's file name (or unique prefix)."""
    runs = list_runs(runs_dir)
    if ref in ALIASES:
        back = ALIASES[ref]
        if len(runs) < back:
            raise StoreError(
                f"there is no {ref} run in {runs_dir}",
                hint="run `fleet probe` first, or pass --runs-dir",
            )
        return runs[-back]
    if Path(ref).is_file():
        return Path(ref)
    matches = [p for p in runs if p.name.startswith(ref)]
    if len(matches) != 1:
        raise StoreError(
            f"no single saved run matches {ref!r} in {runs_dir}",
            hint="use latest, previous, a path, or a file name from `ls` of that folder",
        )
    return matches[0]


def load_run(path: Path) -> Run:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return Run.from_dict(expand_payloads(document))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"cannot read run {path}: {exc}", hint="is it a fleet.run/1 JSON document?"
        ) from exc
