"""The allreduce matrix's variants: which run here (NCCL as configured, each NCCL_ALGO x NCCL_PROTO,
torch's symmetric-memory kernels) and which are absent and why; each one's result, and who wins.

Not a probe (the leading underscore): shipped with the allreduce probe (its `SHIPS`), stdlib
only, Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Optional, Tuple

from _allreduce_config import Config, Matrix, Variant, matrix_option
from _allreduce_ready import describe_error
from _allreduce_rows import failure_of, result_row, significant, size_label

PAT_SINCE = (2, 23)  # NCCL release that added the PAT algorithm
SYMM_MEM_KERNELS = ("one_shot_all_reduce", "two_shot_all_reduce_")  # never multimem_*
SYMM_MEM_MODULES = ("torch.distributed._symmetric_memory", "torch.distributed.symmetric_memory")


def plan_variants(config: Config, torch: Any) -> Tuple[List[Variant], Dict[str, str]]:
    """The variants to run here, and those absent here with the reason (never started)."""
    matrix = config.matrix or matrix_option(True)
    assert matrix is not None
    if config.backend == "gloo":
        return [Variant("gloo:default", "dist", {})], {}
    variants, absent = nccl_variants(matrix, nccl_version_of(torch))
    if matrix.symm_mem:
        found, missing = symm_mem_variants(torch)
        variants += found
        absent.update(missing)
    return variants, absent


def nccl_variants(
    matrix: Matrix, version: Optional[Tuple[int, ...]]
) -> Tuple[List[Variant], Dict[str, str]]:
    """NCCL as the host configures it, then each NCCL_ALGO × NCCL_PROTO asked for. Which of them
    the installed NCCL accepts is learnt by running them: a refusal is that variant's result."""
    variants = [Variant("nccl:default", "dist", {})]
    absent: Dict[str, str] = {}
    for algo in matrix.algos:
        for proto in matrix.protos:
            name = "nccl:%s/%s" % (algo, proto)
            if algo == "PAT" and version is not None and version[:2] < PAT_SINCE:
                absent[name] = "NCCL %s has no PAT algorithm (2.23 and later)" % (
                    ".".join(str(p) for p in version),
                )
                continue
            variants.append(Variant(name, "dist", {"NCCL_ALGO": algo, "NCCL_PROTO": proto}))
    return variants, absent


def nccl_version_of(torch: Any) -> Optional[Tuple[int, ...]]:
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # no NCCL in this torch: the variants will say so themselves
        return None
    return tuple(int(p) for p in version) if isinstance(version, tuple) else None


def symm_mem_variants(torch: Any) -> Tuple[List[Variant], Dict[str, str]]:
    """torch's symmetric-memory allreduce kernels that this torch has (never the multimem ones)."""
    names = ["symm_mem:" + kernel for kernel in SYMM_MEM_KERNELS]
    try:
        module = import_first(SYMM_MEM_MODULES)
    except ImportError as exc:
        return [], {name: "no symmetric memory in this torch: %s" % exc for name in names}
    lacking = [f for f in ("empty", "rendezvous") if not callable(getattr(module, f, None))]
    if lacking:
        why = "%s has no %s" % (module.__name__, " or ".join(lacking))
        return [], {name: why for name in names}
    variants, absent = [], {}
    for kernel, name in zip(SYMM_MEM_KERNELS, names):
        if _has_symm_mem_op(torch, kernel):
            variants.append(Variant(name, name, {}))
        else:
            why = "torch %s has no torch.ops.symm_mem.%s" % (torch.__version__, kernel)
            absent[name] = why
    return variants, absent


def _has_symm_mem_op(torch: Any, kernel: str) -> bool:
    try:
        return hasattr(torch.ops.symm_mem, kernel)
    except Exception:  # an op namespace that cannot even be looked at
        return False


def import_first(names: Tuple[str, ...]) -> Any:
    """The first module of `names` that imports (the imports probe's `a|b` fallback rule)."""
    errors = []
    for name in names:
        try:
            return importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # what is probed may fail in any way
            errors.append(describe_error(exc))
    raise ImportError("; ".join(errors))


def not_run(variant: Variant) -> Dict[str, Any]:
    result = variant_result(variant, "not_run", [], None, 0.0, 0)
    result["error"] = "not run: the matrix's budget ran out first"
    return result


def absent_variant(name: str, reason: str) -> Dict[str, Any]:
    op = name if name.startswith("symm_mem:") else "dist"
    return dict(variant_result(Variant(name, op, {}), "absent", [], reason, 0.0, 0))


def variant_result(
    variant: Variant,
    status: str,
    records: List[Dict[str, Any]],
    error: Optional[str],
    elapsed_s: float,
    world: int,
) -> Dict[str, Any]:
    """One variant's entry in the matrix: its rows, where it failed and why, and one status:
    ok · partial (some sizes or modes failed) · failed · timeout · stopped · not_run · absent."""
    rows = [row for row in (result_row(r, world) for r in records) if row is not None]
    failures = [failure_of(r) for r in records if r.get("mode") and "error" in r]
    failures += [
        {"mode": r["mode"], "bytes": r["bytes"], "error": "wrong sum"}
        for r in rows
        if not r["correct"]
    ]
    fatal = next((r["fatal"] for r in records if r.get("fatal")), None)
    if status == "finished":
        status = "partial" if failures and rows else ("ok" if rows else "failed")
    failed_at = sorted({"%s %s" % (f["mode"], size_label(f["bytes"])) for f in failures})
    if status in ("failed", "timeout"):
        failed_at.append(status)
    return {
        "op": variant.op,
        "env": dict(variant.env),
        "status": status,
        "error": (fatal or error or _first_error(failures)) if status != "ok" else None,
        "failed_at": failed_at,
        "failures": failures,
        "rows": rows,
        "elapsed_s": round(elapsed_s, 3),
    }


def _first_error(failures: List[Dict[str, Any]]) -> Optional[str]:
    return str(failures[0]["error"]) if failures else None


def matrix_winners(variants: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, str]]:
    """Per mode and size, the variant with the lowest correct latency (ties: the first name in
    sort order); every row gets `ratio`, its latency over the winner's (1.0 = the winner)."""
    best: Dict[Tuple[str, int], Tuple[float, str]] = {}
    for name in sorted(variants):
        for row in variants[name].get("rows") or []:
            key = (row["mode"], row["bytes"])
            if row.get("correct") is True and (key not in best or row["latency_us"] < best[key][0]):
                best[key] = (row["latency_us"], name)
    for entry in variants.values():
        for row in entry.get("rows") or []:
            fastest = best.get((row["mode"], row["bytes"]))
            row["ratio"] = significant(row["latency_us"] / fastest[0], 4) if fastest else None
    winners: Dict[str, Dict[str, str]] = {}
    for (mode, size), (_, name) in sorted(best.items()):
        winners.setdefault(mode, {})[size_label(size)] = name
    return winners
