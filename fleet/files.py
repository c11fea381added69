"""Private files and folders on the controller: saved runs, fleet's own known_hosts."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def ensure_private_dir(path: Path) -> Path:
    """Make `path` 0700, and every parent folder we create too (mkdir -p would make those 0777
    under umask 000, and a world-writable parent lets anyone swap our runs or known_hosts)."""
    for folder in reversed([p for p in (path, *path.parents) if not p.exists()]):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        os.chmod(folder, 0o700)  # mkdir's mode is filtered by umask
    os.chmod(path, 0o700)  # the folder may already exist
    return path
