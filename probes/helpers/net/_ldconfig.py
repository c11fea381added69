"""The dynamic linker's cache (`ldconfig -p`): where the nccl probe finds libnccl and the net
probe NCCL's network plugins. Shipped with both (their `SHIPS`).

Not a probe (the leading underscore): stdlib only, Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import List, Optional, Pattern, Tuple

# "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2"
LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


def entries_named(text: str, name: Pattern[str]) -> List[Tuple[str, str]]:
    """`ldconfig -p` -> (soname, path) of every entry whose soname matches `name`, in order."""
    found = []
    for line in text.splitlines():
        match = LDCONFIG_LINE.match(line)
        if match and name.match(match.group(1)):
            found.append((match.group(1), match.group(3)))
    return found


def run_ldconfig(timeout_s: float) -> Optional[Tuple[int, str]]:
    """(exit code, output) of `ldconfig -p`; None when ldconfig is absent or cannot run."""
    executable = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.isfile(p)), None
    )
    if executable is None:
        return None
    try:
        completed = subprocess.run(
            [executable, "-p"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.returncode, completed.stdout.decode("utf-8", "replace")
