"""The host itself: hostname, OS, kernel, CPUs, memory, and the Python that runs the probes."""

from __future__ import annotations

import os
import platform
import socket
import sys

# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py).
FACTS = {
    "identity": ["hostname"],
    "hardware": ["cpu_count", "cpus_usable", "memory_gib", "machine"],
}


def parse_os_release(text: str) -> dict:
    """`/etc/os-release` KEY="value" lines → dict (quotes stripped, comments skipped)."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            fields[key] = value.strip().strip("\"'")
    return fields


def parse_meminfo_kib(text: str, field: str = "MemTotal") -> int | None:
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name == field and rest.split():
            return int(rest.split()[0])
    return None


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def os_facts() -> dict:
    release = parse_os_release(read_text("/etc/os-release"))
    return {
        "os": release.get("PRETTY_NAME") or platform.system(),
        "os_id": release.get("ID"),
        "os_version": release.get("VERSION_ID"),
        "kernel": platform.release(),
        "machine": platform.machine(),
    }


def resource_facts() -> dict:
    mem_kib = parse_meminfo_kib(read_text("/proc/meminfo"))
    usable = getattr(os, "sched_getaffinity", None)
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(usable(0)) if usable else os.cpu_count(),
        # GiB, rounded: MemTotal differs by a few MiB between identical hosts (kernel reservations)
        "memory_gib": round(mem_kib / (1024 * 1024)) if mem_kib else None,
    }


def python_facts() -> dict:
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "prefix": sys.prefix,
        "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
    }


def collect(options: dict) -> dict:
    data: dict = {"hostname": socket.gethostname()}
    data.update(os_facts())
    data.update(resource_facts())
    data["python"] = python_facts()
    return {"ok": True, "data": data, "error": None}


if __name__ == "__main__":
    import json

    del sys.path[0]
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
