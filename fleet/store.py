"""Saved runs: one JSON file per run, readable only by its owner, written atomically.

Later commands compare runs (drift), so a run is never lost half-written: we write a temp file in
the same folder, fsync it, and rename it over the final name.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from fleet.errors import StoreError
from fleet.models import Run
from fleet.redact import mask_secrets

DEFAULT_RUNS_DIR = Path("~/.local/state/fleet/runs")
ALIASES = {"latest": 1, "previous": 2}


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "fleet"


def default_runs_dir() -> Path:
    return default_state_dir() / "runs"


def ensure_private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)  # mkdir's mode is filtered by umask, and the folder may already exist
    return path


def write_private_json(path: Path, document: dict[str, Any]) -> None:
    """Atomically replace `path` with `document` as JSON, mode 0600."""
    text = json.dumps(mask_secrets(document), indent=2, sort_keys=False, ensure_ascii=False)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def run_file_name(run: Run) -> str:
    stamp = run.started.replace(":", "").replace("-", "").split(".")[0].rstrip("Z")
    return f"{stamp}Z-{run.bundle_sha256[:8]}.json"


def save_run(run: Run, runs_dir: Path) -> Path:
    try:
        ensure_private_dir(runs_dir)
        path = runs_dir / run_file_name(run)
        write_private_json(path, run.to_dict())
    except OSError as exc:
        raise StoreError(
            f"cannot save the run in {runs_dir}: {exc.strerror}",
            hint="pass a writable folder with --runs-dir",
        ) from None
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
        return Run.from_dict(document)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"cannot read run {path}: {exc}", hint="is it a fleet.run/1 JSON document?"
        ) from None
