"""NCCL settings and libraries: NCCL_* variables, nccl.conf files, libnccl copies and torch's NCCL.

Outcome: ok is True when some NCCL library is found (through ldconfig, a pip `nvidia-nccl-*`
wheel, or torch reporting a version); ok is False with "no NCCL library found" otherwise. Either
way `data` holds everything seen, NCCL_* variables and config files included, since a host that
sets NCCL_P2P_DISABLE=1 without any NCCL is itself a fact worth diffing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

import _ldconfig
from _nccl_conf import SYSTEM_CONF, USER_CONF, parse_nccl_conf

TIMEOUT_S = 90
SHIPS = ("_nccl_conf.py", "_ldconfig.py")  # helpers the bundle carries with this probe
PRELOAD = (
    "torch",
)  # imported once for all such probes, then forked (probes/runner/_host_runner.py)
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py).
FACTS = {"volatile": ["conf_errors", "torch_error"]}
LDCONFIG_TIMEOUT_S = 10.0
TORCH_TIMEOUT_S = 60.0
# Reading a 200-400 MB libnccl to find its version string is bounded in bytes and in time.
BINARY_SCAN_MAX_BYTES = 512 * 1024 * 1024
BINARY_SCAN_MAX_S = 5.0
BINARY_SCAN_CHUNK = 8 * 1024 * 1024

ENV_PREFIX = "NCCL_"
LIBNCCL_NAME = re.compile(r"^libnccl\.so(?:\.\d+)*$")
LIBNCCL_VERSION = re.compile(r"^libnccl\.so\.(\d+\.\d+\.\d+)$")
# NCCL's VERSION_STRING: "NCCL version 2.27.3+cuda12.9".
BINARY_VERSION = re.compile(rb"NCCL version (\d+\.\d+\.\d+)(\+cuda[\d.]+)?")

# Runs in a child `python -c`: importing torch takes seconds and may hang or crash, and the probe
# must survive both. Drops '' from sys.path first so that probes/torch.py is never imported.
TORCH_NCCL_SOURCE = """
import json, sys
del sys.path[0]
try:
    import torch
    version = torch.cuda.nccl.version()
    print(json.dumps({"version": version, "torch": torch.__version__}))
except BaseException as exc:
    print(json.dumps({"error": "%s: %s" % (type(exc).__name__, exc)}))
"""


# ---------------------------------------------------------------- pure parsers


def nccl_environment(environ: Dict[str, str]) -> Dict[str, str]:
    """The NCCL_* variables only: the allow-list that keeps other secrets home."""
    return {key: value for key, value in sorted(environ.items()) if key.startswith(ENV_PREFIX)}


def parse_ldconfig(text: str) -> List[str]:
    """`ldconfig -p` -> the paths of libnccl.so* entries, in listed order."""
    return [path for _, path in _ldconfig.entries_named(text, LIBNCCL_NAME)]


def version_from_filename(path: str) -> Optional[str]:
    """libnccl.so.2.27.3 -> "2.27.3"; libnccl.so.2 or libnccl.so say nothing."""
    match = LIBNCCL_VERSION.match(os.path.basename(path))
    return match.group(1) if match else None


def torch_nccl_version(value: Any) -> Optional[str]:
    """torch.cuda.nccl.version(): a tuple (2, 27, 3) in recent torch, an int 2708/22703 in old."""
    if isinstance(value, (list, tuple)) and value:
        return ".".join(str(part) for part in value)
    if isinstance(value, int):
        # NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + ... before.
        major, rest = (value // 10000, value % 10000) if value >= 20900 else divmod(value, 1000)
        return "%d.%d.%d" % (major, rest // 100, rest % 100)
    return None


# ---------------------------------------------------------------- touching the host


def read_conf_files(paths: Iterable[Tuple[str, str]]) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """(label, path) pairs -> ({label: settings} for files present, {label: error})."""
    found: Dict[str, Any] = {}
    errors: Dict[str, str] = {}
    for label, path in paths:
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as conf:
                found[label] = parse_nccl_conf(conf.read())
        except OSError as exc:
            errors[label] = "%s: %s" % (type(exc).__name__, exc)
    return found, errors


def conf_file_paths(environ: Dict[str, str]) -> List[Tuple[str, str]]:
    """Where NCCL looks: $NCCL_CONF_FILE (or else ~/.nccl.conf), then /etc/nccl.conf."""
    paths = []
    if environ.get("NCCL_CONF_FILE"):
        paths.append((environ["NCCL_CONF_FILE"], environ["NCCL_CONF_FILE"]))
    else:
        # Labelled "~/.nccl.conf", not the expanded path, so hosts with different users still diff.
        paths.append((USER_CONF, os.path.expanduser(USER_CONF)))
    paths.append((SYSTEM_CONF, SYSTEM_CONF))
    return paths


def ldconfig_libraries(timeout_s: float) -> List[str]:
    """libnccl paths known to the dynamic linker; [] when ldconfig is absent or fails."""
    ran = _ldconfig.run_ldconfig(timeout_s)
    return [] if ran is None else parse_ldconfig(ran[1])


def wheel_libraries() -> List[Tuple[str, Optional[str], str]]:
    """(path, wheel version, wheel name) for each libnccl a pip nvidia-nccl-* wheel installed."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8 has no importlib.metadata
        return []
    found: List[Tuple[str, Optional[str], str]] = []
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if not name.startswith("nvidia-nccl"):
            continue
        for file in dist.files or []:
            if LIBNCCL_NAME.match(os.path.basename(str(file))):
                found.append((str(dist.locate_file(file)), dist.version, name))
    return found


def site_packages_libraries() -> List[str]:
    """libnccl under nvidia/nccl/lib on sys.path: wheels installed without metadata, or vendored."""
    found = []
    for entry in sys.path:
        lib_dir = os.path.join(entry or ".", "nvidia", "nccl", "lib")
        if os.path.isdir(lib_dir):
            names = sorted(n for n in os.listdir(lib_dir) if LIBNCCL_NAME.match(n))
            found += [os.path.join(lib_dir, name) for name in names]
    return found


def binary_version(path: str) -> Optional[str]:
    """The "NCCL version x.y.z+cudaA.B" string inside the library, within the scan's bounds."""
    deadline = time.monotonic() + BINARY_SCAN_MAX_S
    tail = b""
    read = 0
    try:
        with open(path, "rb") as library:
            while read < BINARY_SCAN_MAX_BYTES and time.monotonic() < deadline:
                chunk = library.read(BINARY_SCAN_CHUNK)
                if not chunk:
                    return None
                read += len(chunk)
                match = BINARY_VERSION.search(tail + chunk)
                if match:
                    return (match.group(1) + (match.group(2) or b"")).decode("ascii")
                tail = chunk[-64:]  # a match split across two chunks is still found
    except OSError:
        return None
    return None


def describe_library(path: str, source: str, wheel_version: Optional[str] = None) -> Dict[str, Any]:
    real_path = os.path.realpath(path)
    from_binary = binary_version(real_path)
    # The string inside the binary is what NCCL itself reports; names and wheels can drift.
    versions = (
        ("binary", from_binary.split("+")[0] if from_binary else None),
        ("filename", version_from_filename(real_path) or version_from_filename(path)),
        ("wheel", wheel_version),
    )
    version_source, version = next(((s, v) for s, v in versions if v), (None, None))
    return {
        "path": path,
        "real_path": real_path,
        "source": source,
        "version": version,
        "version_source": version_source,
        "version_string": from_binary,
        "wheel_version": wheel_version,
    }


def find_libraries(ldconfig_timeout_s: float) -> List[Dict[str, Any]]:
    """One entry per distinct library file (ldconfig lists libnccl.so and .so.2 for one file)."""
    candidates: List[Tuple[str, str, Optional[str]]] = []
    candidates += [(path, "ldconfig", None) for path in ldconfig_libraries(ldconfig_timeout_s)]
    candidates += [(path, "wheel:" + name, version) for path, version, name in wheel_libraries()]
    candidates += [(path, "site-packages", None) for path in site_packages_libraries()]
    libraries: List[Dict[str, Any]] = []
    seen = set()
    for path, source, wheel_version in candidates:
        real_path = os.path.realpath(path)
        if real_path in seen or not os.path.isfile(real_path):
            continue
        seen.add(real_path)
        libraries.append(describe_library(path, source, wheel_version))
    return libraries


def torch_reported_version(timeout_s: float) -> Tuple[Optional[str], Optional[str]]:
    """(version torch reports, why there is none): asked in-process when torch is already imported
    (the runner preloads it), else from a child interpreter, so this probe never pays for it."""
    if "torch" in sys.modules:
        try:
            return torch_nccl_version(sys.modules["torch"].cuda.nccl.version()), None
        except Exception as exc:  # a CPU build has no NCCL: a fact, reported as such
            return None, "%s: %s" % (type(exc).__name__, exc)
    try:
        completed = subprocess.run(
            [sys.executable, "-c", TORCH_NCCL_SOURCE],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, "import torch timed out after %g s" % timeout_s
    return _torch_answer(completed.stdout.decode("utf-8", "replace"), completed.returncode)


def _torch_answer(stdout: str, returncode: int) -> Tuple[Optional[str], Optional[str]]:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        return None, "torch child exited %d without an answer" % returncode
    answer = json.loads(lines[-1])
    if "error" in answer:
        return None, answer["error"]
    return torch_nccl_version(answer.get("version")), None


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Touch the host; return {"ok": bool, "data": {...}, "error": str | None}."""
    environ = dict(os.environ)
    conf_files, conf_errors = read_conf_files(conf_file_paths(environ))
    libraries = find_libraries(float(options.get("ldconfig_timeout_s", LDCONFIG_TIMEOUT_S)))
    torch_version: Optional[str] = None
    torch_error: Optional[str] = "skipped (option torch=false)"
    if options.get("torch", True):
        torch_version, torch_error = torch_reported_version(
            float(options.get("torch_timeout_s", TORCH_TIMEOUT_S))
        )
    data = {
        "env": nccl_environment(environ),
        "conf_files": conf_files,
        "conf_errors": conf_errors,
        "libraries": libraries,
        "torch_nccl_version": torch_version,
        "torch_error": torch_error,
    }
    found = bool(libraries) or torch_version is not None
    return {"ok": found, "data": data, "error": None if found else "no NCCL library found"}


if __name__ == "__main__":
    del sys.path[0]  # so that `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
