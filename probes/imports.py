"""Import specs with fallbacks: which module or class name resolves, and the package version."""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import sys
from typing import Any, Dict, List, NamedTuple, Optional

from _bounded_text import describe_error

SHIPS = ("_bounded_text.py",)  # helpers the bundle carries with this probe
TIMEOUT_S = 120  # importing torch, vllm and sglang cold can take tens of seconds
PRELOAD = (
    "torch",
)  # imported once for all such probes, then forked (probes/runner/_host_runner.py)
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py): what was tried
# explains `resolved`, which is the fact; the attempts and their messages are detail.
FACTS = {"volatile": ["results.*.tried"]}

DEFAULT_SPECS = [
    "torch",
    "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory",
    "triton",
    "flashinfer",
    "sgl_kernel",
    "sglang",
    "vllm",
    "vllm._custom_ops",
    "mscclpp",
    "deep_ep",
]

_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# A distribution's name is not always its import name; these are the ones worth knowing by heart.
_KNOWN_DISTRIBUTIONS = {
    "flashinfer": ["flashinfer-python", "flashinfer"],
    "sgl_kernel": ["sgl-kernel"],
}


class ImportSpec(NamedTuple):
    """`module:Name|Alt` → modules=[module], names=[Name, Alt]; `mod|alt` → modules=[mod, alt]."""

    modules: List[str]
    names: List[str]


def parse_spec(spec: str) -> ImportSpec:
    """Parse one spec; raise ValueError with the reason when it is not valid."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("empty spec")
    module_part, colon, names_part = spec.strip().partition(":")
    if colon:
        _check_all(_MODULE_RE, [module_part], "module")
        names = names_part.split("|")
        _check_all(_NAME_RE, names, "name")
        return ImportSpec([module_part], names)
    modules = module_part.split("|")
    _check_all(_MODULE_RE, modules, "module")
    return ImportSpec(modules, [])


def _check_all(pattern: re.Pattern, parts: List[str], kind: str) -> None:
    for part in parts:
        if not pattern.match(part):
            raise ValueError(
                "invalid %s %r (expected `module:Name|Alt` or `module|alt`)" % (kind, part)
            )


@contextlib.contextmanager
def _stdout_to_stderr():
    """Imported modules sometimes print banners; keep them out of the probe's JSON on stdout."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def _import(module: str) -> Any:
    with _stdout_to_stderr():
        return importlib.import_module(module)


def _get_name(module: Any, module_name: str, name: str) -> Any:
    """What `from module import name` does: an attribute, else a submodule of that name."""
    if hasattr(module, name):
        return getattr(module, name)
    try:
        return _import(module_name + "." + name)
    except ImportError:
        where = getattr(module, "__file__", None) or "unknown location"
        raise ImportError(
            "cannot import name %r from %r (%s)" % (name, module_name, where)
        ) from None


def resolve(spec: ImportSpec) -> Dict[str, Any]:
    """Try each target in order; stop at the first that imports."""
    tried: List[Dict[str, str]] = []
    for module_name in spec.modules:
        try:
            module = _import(module_name)
        except (Exception, SystemExit) as exc:  # what is probed may fail in any way
            tried.append({"target": module_name, "error": describe_error(exc)})
            continue
        if not spec.names:
            return {"resolved": module_name, "tried": tried}
        for name in spec.names:
            target = module_name + ":" + name
            try:
                _get_name(module, module_name, name)
            except (Exception, SystemExit) as exc:
                tried.append({"target": target, "error": describe_error(exc)})
                continue
            return {"resolved": target, "tried": tried}
    return {"resolved": None, "tried": tried}


def distribution_version(top_level: str) -> Optional[str]:
    """The version of the top-level package: its `__version__` if imported, else its metadata."""
    module = sys.modules.get(top_level)
    version = getattr(module, "__version__", None) if module is not None else None
    if isinstance(version, str):
        return str(version)  # torch's TorchVersion is a str subclass: make it plain
    return _metadata_version(top_level)


def _metadata_version(top_level: str) -> Optional[str]:
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python 3.8 has it; 3.7 and older are out of scope
        return None
    for name in _distribution_candidates(top_level):
        try:
            return metadata.version(name)
        except Exception:  # PackageNotFoundError, or broken metadata
            continue
    return None


@functools.lru_cache(maxsize=1)
def _packages_distributions() -> Dict[str, List[str]]:
    """Top-level module → distributions, like importlib.metadata.packages_distributions() but
    without its stat() of every installed file (1.8 s in the H200 host's venv, 26,000 files):
    `top_level.txt` when a distribution has one, else the first parts of its RECORD's paths."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python 3.8 has it; 3.7 and older are out of scope
        return {}
    mapping: Dict[str, List[str]] = {}
    with contextlib.suppress(Exception):  # a broken site-packages costs only the versions
        for dist in metadata.distributions():
            name = _distribution_name(dist)
            if name is None:
                continue
            for top_level in sorted(_top_levels(dist)):
                mapping.setdefault(top_level, []).append(name)
    return mapping


def _distribution_name(dist: Any) -> Optional[str]:
    """`Name:` from the metadata headers, without the email parser (0.75 ms a distribution)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        if line.lower().startswith("name:"):
            return line[5:].strip()
    return None


def _top_levels(dist: Any) -> set:
    declared = dist.read_text("top_level.txt")
    if declared:
        return set(declared.split())
    found = set()
    for line in (dist.read_text("RECORD") or "").splitlines():
        path = line.split(",", 1)[0]
        first, slash, _ = path.partition("/")
        if slash and "." not in first and first != "__pycache__":  # not *.dist-info, *.libs, ..
            found.add(first)
        elif not slash and path.endswith((".py", ".so", ".pyd")):
            found.add(path.split(".", 1)[0])
    return found


def _distribution_candidates(top_level: str) -> List[str]:
    candidates: List[str] = list(_packages_distributions().get(top_level, []))
    candidates.extend(_KNOWN_DISTRIBUTIONS.get(top_level, []))
    candidates.extend([top_level, top_level.replace("_", "-")])
    return list(dict.fromkeys(candidates))


def probe_spec(spec_text: str) -> Dict[str, Any]:
    """The result for one spec; an invalid spec is reported in its own result, never raised."""
    try:
        spec = parse_spec(spec_text)
    except ValueError as exc:
        return {
            "resolved": None,
            "tried": [],
            "version": None,
            "error": "invalid spec %r: %s" % (spec_text, exc),
        }
    result = resolve(spec)
    target = result["resolved"] or spec.modules[0]
    result["version"] = distribution_version(target.split(":")[0].split(".")[0])
    result["error"] = None
    return result


def specs_from_options(options: Dict[str, Any]) -> List[str]:
    specs = options.get("specs")
    if specs is None:
        return list(DEFAULT_SPECS)
    if isinstance(specs, str):
        return [specs]
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise ValueError("option 'specs' must be a list of strings, got %r" % (specs,))
    return list(specs)


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Resolve every spec; ok stays True when some are absent (absence is the fact reported)."""
    try:
        specs = specs_from_options(options)
    except ValueError as exc:
        return {"ok": False, "data": {"results": {}}, "error": str(exc)}
    results = {spec: probe_spec(spec) for spec in specs}
    return {"ok": True, "data": {"results": results}, "error": None}


if __name__ == "__main__":
    import json
    import sys

    del sys.path[0]  # so `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
