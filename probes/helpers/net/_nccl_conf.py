"""NCCL's config files as NCCL reads them: shipped with the nccl and net probes (their `SHIPS`),
which both report the settings a host's nccl.conf files give.

Not a probe (the leading underscore): stdlib only, Python 3.8, importable by name on the host.
"""

from __future__ import annotations

from typing import Dict

SYSTEM_CONF = "/etc/nccl.conf"
USER_CONF = "~/.nccl.conf"


def parse_nccl_conf(text: str) -> Dict[str, str]:
    """KEY=VALUE lines as NCCL reads them: '#' lines and lines without '=' are skipped."""
    settings: Dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key.strip():
            settings[key.strip()] = value.strip()
    return settings
