"""dir() of modules and torch.ops namespaces: sorted names and a sha256 that diffs at a glance."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import sys
from typing import Any, Dict, List, Optional

from _bounded_text import bound_text, describe_error

SHIPS = ("_bounded_text.py",)  # helpers the bundle carries with this probe
TIMEOUT_S = 120  # importing torch, flashinfer and sgl_kernel cold can take tens of seconds
PRELOAD = (
    "torch",
)  # imported once for all such probes, then forked (probes/runner/_host_runner.py)
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py).
# count and sha256 follow from names, which are compared name by name.
FACTS = {"sets": ["modules.*.names"], "volatile": ["modules.*.sha256", "modules.*.count"]}

DEFAULT_MODULES = [
    "torch.distributed._symmetric_memory",
    "torch.distributed",
    "torch.cuda.nccl",
    "sgl_kernel",
    "flashinfer",
    "torch.ops.sgl_kernel",
    "torch.ops._C",
]

OPS_PREFIX = "torch.ops."

# An op namespace is filled by loading the library that registers it; import that library first.
OP_NAMESPACE_PROVIDERS = {
    "sgl_kernel": ["sgl_kernel"],
    "_C": ["vllm._C"],
    "_vllm_fa2_C": ["vllm.vllm_flash_attn._vllm_fa2_C"],
    "_moe_C": ["vllm._moe_C"],
}


def names_digest(names: List[str]) -> str:
    """sha256 of the names joined by newlines: equal digests mean equal name lists."""
    return hashlib.sha256("\n".join(names).encode("utf-8")).hexdigest()


def listing(names: List[str]) -> Dict[str, Any]:
    ordered = sorted(set(names))
    return {"names": ordered, "count": len(ordered), "sha256": names_digest(ordered), "error": None}


def failure(message: str) -> Dict[str, Any]:
    return {"names": [], "count": 0, "sha256": None, "error": bound_text(message)}


def op_names_in_namespace(all_op_names: List[str], namespace: str) -> List[str]:
    """`ns::op.overload` qualified names → the op names of `namespace`, overloads folded."""
    prefix = namespace + "::"
    return sorted(
        {name[len(prefix) :].split(".")[0] for name in all_op_names if name.startswith(prefix)}
    )


@contextlib.contextmanager
def _stdout_to_stderr():
    """Imported modules sometimes print banners; keep them out of the probe's JSON on stdout."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def _import(module: str) -> Any:
    with _stdout_to_stderr():
        return importlib.import_module(module)


def dir_of_module(module_name: str) -> Dict[str, Any]:
    try:
        module = _import(module_name)
    except (Exception, SystemExit) as exc:  # what is probed may fail in any way
        return failure(describe_error(exc))
    return listing(dir(module))


def _load_providers(namespace: str) -> List[str]:
    """Import the libraries that register `namespace`; return why each one failed."""
    problems = []
    for provider in OP_NAMESPACE_PROVIDERS.get(namespace, []):
        try:
            _import(provider)
        except (Exception, SystemExit) as exc:
            problems.append("importing %s failed: %s" % (provider, describe_error(exc)))
    return problems


def _registered_op_names(torch: Any, namespace: str) -> Optional[List[str]]:
    """Every op the dispatcher knows under `namespace`, or None on a torch without that API."""
    get_all = getattr(getattr(torch, "_C", None), "_dispatch_get_all_op_names", None)
    if get_all is None:
        return None
    return op_names_in_namespace(list(get_all()), namespace)


def _accessed_op_names(torch: Any, namespace: str) -> List[str]:
    """Fallback: the names an `_OpNamespace` has resolved so far (dunders left out)."""
    ops_namespace = getattr(torch.ops, namespace)
    return [
        name
        for name in dir(ops_namespace)
        if not name.startswith("__") and name not in ("_dir", "name")
    ]


def dir_of_op_namespace(namespace: str) -> Dict[str, Any]:
    """`torch.ops.<ns>` is created on attribute access, so list the ops the dispatcher holds."""
    try:
        torch = _import("torch")
        torch.ops  # noqa: B018 - a torch without op namespaces fails here, reported below
    except (Exception, SystemExit) as exc:
        return failure(describe_error(exc))
    problems = _load_providers(namespace)
    names = _registered_op_names(torch, namespace)
    if names is None:
        names = _accessed_op_names(torch, namespace)
    if names:
        return listing(names)
    reason = "LookupError: no operators registered in %s%s" % (OPS_PREFIX, namespace)
    return failure("; ".join([reason, *problems]))


def dir_of(target: str) -> Dict[str, Any]:
    if target.startswith(OPS_PREFIX):
        return dir_of_op_namespace(target[len(OPS_PREFIX) :])
    return dir_of_module(target)


def modules_from_options(options: Dict[str, Any]) -> List[str]:
    modules = options.get("modules")
    if modules is None:
        return list(DEFAULT_MODULES)
    if isinstance(modules, str):
        return [modules]
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise ValueError("option 'modules' must be a list of strings, got %r" % (modules,))
    return list(modules)


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """dir() of every module; a module that does not import is a fact in its own entry."""
    try:
        modules = modules_from_options(options)
    except ValueError as exc:
        return {"ok": False, "data": {"modules": {}}, "error": str(exc)}
    return {
        "ok": True,
        "data": {"modules": {name: dir_of(name) for name in modules}},
        "error": None,
    }


if __name__ == "__main__":
    import json
    import sys

    del sys.path[0]  # so `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
