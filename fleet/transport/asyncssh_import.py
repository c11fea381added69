"""asyncssh, imported without running a compiler: `from fleet.transport.asyncssh_import import
asyncssh`.

When it is imported, asyncssh looks for two optional C libraries (liboqs for post-quantum key
exchange, nettle for UMAC) with `ctypes.util.find_library`. On Linux that reads the dynamic
loader's cache (`ldconfig -p`) and, for a name not in it, runs `gcc` and then `ld` to ask where
the linker would find it: seven processes for the three names it tries on a machine without
liboqs, about 20 ms of CPU of every fleet command that opens SSH (bench/README.md, issue 45).

While asyncssh imports, a name is looked up where the dynamic loader itself would find it: the
loader's cache, then the folders of LD_LIBRARY_PATH. The linker's search path is left out on
purpose: a library only the linker finds (a `-L` folder, a static archive) is one that `dlopen`
cannot load anyway. Elsewhere (macOS, other systems), and where the standard library has no
loader-cache reader, find_library is left as it is.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path


def in_library_path(name: str, library_path: str | None = None) -> str | None:
    """The first `libNAME.so*` in a folder of LD_LIBRARY_PATH (or `library_path`), as a path
    that `ctypes.CDLL` loads as it is; None when there is none."""
    folders = os.environ.get("LD_LIBRARY_PATH", "") if library_path is None else library_path
    for folder in filter(None, folders.split(os.pathsep)):
        with contextlib.suppress(OSError):
            for found in sorted(Path(folder).glob(f"lib{name}.so*")):
                return str(found)
    return None


def loader_lookup(from_cache: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """find_library's answer from the loader's cache (`from_cache`), then LD_LIBRARY_PATH."""

    def find_library(name: str) -> str | None:
        return from_cache(name) or in_library_path(name)

    return find_library


@contextlib.contextmanager
def loader_lookups() -> Iterator[None]:
    """While in the block, `ctypes.util.find_library` runs no compiler (Linux only)."""
    from_cache = getattr(ctypes.util, "_findSoname_ldconfig", None)
    if not sys.platform.startswith("linux") or from_cache is None:
        yield
        return
    names = vars(ctypes.util)  # the module's own namespace: what asyncssh's lookups read
    original = names["find_library"]
    names["find_library"] = loader_lookup(from_cache)
    try:
        yield
    finally:
        names["find_library"] = original


with loader_lookups():
    import asyncssh

__all__ = ["asyncssh"]
