"""Every read the net probe makes of the host goes through one Tree(root): "/" in production, a
sysfs tree built from public captures in the tests; with the small helpers every part shares.

Not a probe (the leading underscore): shipped with the net probe (its `SHIPS`), stdlib only,
Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, List, Optional

PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


class Tree:
    """Every read of the host goes through here: paths are relative to `root` ("/" in production,
    a fixture tree in the tests). A file that is absent, or that the kernel refuses to read
    (EINVAL: a GID slot with no entry, the speed of a link that is down), reads as None; one this
    user may not read is None too, and its path lands in `unreadable`."""

    def __init__(self, root: str = "/") -> None:
        self.root = root
        self.unreadable: List[str] = []

    def path(self, relative: str) -> str:
        return os.path.join(self.root, relative.lstrip("/"))

    def read(self, relative: str) -> Optional[str]:
        try:
            with open(self.path(relative), "rb") as handle:
                return handle.read(65536).decode("utf-8", "replace").strip()
        except PermissionError:
            self.unreadable.append("/" + relative.lstrip("/"))
        except (OSError, ValueError):
            pass
        return None

    def listdir(self, relative: str) -> Optional[List[str]]:
        """Sorted names, or None when the folder is absent or not readable."""
        try:
            return sorted(os.listdir(self.path(relative)))
        except PermissionError:
            self.unreadable.append("/" + relative.lstrip("/"))
        except OSError:
            pass
        return None

    def exists(self, relative: str) -> bool:
        return os.path.lexists(self.path(relative))

    def link_name(self, relative: str) -> Optional[str]:
        """The last part of a symlink's target: a driver's or a device's name."""
        try:
            return os.path.basename(os.readlink(self.path(relative)).rstrip("/"))
        except OSError:
            return None

    def pci_address(self, relative: str) -> Optional[str]:
        """The PCI bus id of the device at `relative` (a `device` symlink): the resolved path's
        last part, or the nearest PCI device above it (a virtio NIC sits under its PCI function)."""
        if not self.exists(relative):
            return None
        path = os.path.realpath(self.path(relative))
        for _ in range(3):
            if PCI_ADDRESS.match(os.path.basename(path)):
                return os.path.basename(path)
            path = os.path.dirname(path)
        return None

    def is_dir(self, relative: str) -> bool:
        return os.path.isdir(self.path(relative))


def to_int(text: Optional[str]) -> Optional[int]:
    """Decimal, or hex with 0x ("0x15b3", a PCI vendor); None for anything else."""
    if text is None:
        return None
    text = text.strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def port_label(device: str, port: str) -> str:
    return "%s/%s" % (device, port)


def natural_key(name: str) -> List[Any]:
    """mlx5_2 before mlx5_10."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name)]


def natural_sorted(names: Iterable[str]) -> List[str]:
    return sorted(names, key=natural_key)
