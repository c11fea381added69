#!/usr/bin/env bash
# The bundle against a bare `import torch` on a GPU host, for several versions of fleet in one
# call, interleaved round by round (the machine's own drift hits every version alike):
#   OUT=/tmp/out bash bench/device_bundle_ab.sh old=.whl/ab/old.tar new=.whl/ab/new.tar [ROUNDS]
# Each LABEL=TAR is a `git archive` of a fleet tree; each is compiled once (as an install is).
# Per round: `python3 -c "import torch"`, then `python3 -m fleet probe -i inventory/local.yaml
# --no-allreduce --no-save --json` for each version (wall seconds, and each probe's elapsed_s).
# Each version's bundle alone, as the host runs it (`python3 - < bundle.py`: the per-host cost,
# no controller), is timed in each round too (alone_LABEL). Also: cuInit alone, torch's first CUDA call
# after the import (what the torch probe adds), and each default import spec's own time.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTHONDONTWRITEBYTECODE
OUT=${OUT:-/tmp/fleet-out}
mkdir -p "$OUT"
ROUNDS=5
TREES=()
for arg in "$@"; do
    case $arg in
        *=*) TREES+=("$arg") ;;
        *) ROUNDS=$arg ;;
    esac
done
if ls .whl/*.whl >/dev/null 2>&1; then  # what the GPU image lacks (jmespath, asyncssh, …)
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
for tree in "${TREES[@]}"; do
    label=${tree%%=*}
    mkdir -p "/tmp/ab/$label" && tar -xf "${tree#*=}" -C "/tmp/ab/$label"
    python3 -m compileall -q "/tmp/ab/$label/fleet" >/dev/null
done
for tree in "${TREES[@]}"; do  # each version's own bundle, timed alone as the host runs it
    label=${tree%%=*}
    (cd "/tmp/ab/$label" && PYTHONPATH="/tmp/ab/$label:/tmp/site" python3 - "$label" <<'PY'
import sys
from pathlib import Path
from fleet.execution.bundle import build_bundle
from fleet.execution.fanout import REMOTE_PARALLEL
probes = ["system", "packages", "gpu", "torch", "nccl", "dir", "imports", "health", "live", "net"]
script = build_bundle(probes).script({}, 300.0, REMOTE_PARALLEL)
Path(f"/tmp/ab/bundle_{sys.argv[1]}.py").write_bytes(script)
print(f"{sys.argv[1]}: bundle of {len(probes)} probes, {len(script)} bytes")
PY
    )
done
python3 -c "import torch" # the page cache warm for every tool below
python3 - <<'PY' | tee "$OUT/cuda_init.txt"
import ctypes, time
t = time.perf_counter(); ctypes.CDLL("libcuda.so.1").cuInit(0)
print(f"cuInit alone: {time.perf_counter() - t:.3f} s")
PY
python3 - <<'PY' | tee -a "$OUT/cuda_init.txt"
import time
t = time.perf_counter(); import torch; imported = time.perf_counter() - t
t = time.perf_counter(); n = torch.cuda.device_count(); torch.cuda.get_device_properties(0)
print(f"import torch {imported:.3f} s, then device_count+properties {time.perf_counter() - t:.3f} s ({n} GPUs)")
PY
python3 - <<'PY' | tee -a "$OUT/cuda_init.txt"
import importlib, time
t = time.perf_counter(); import torch; print(f"import torch {time.perf_counter() - t:.3f} s; then each spec:")
for name in ["torch.distributed._symmetric_memory", "triton", "flashinfer", "sgl_kernel", "sglang", "vllm", "mscclpp", "deep_ep"]:
    t = time.perf_counter()
    try:
        importlib.import_module(name); how = "ok"
    except Exception as exc:
        how = type(exc).__name__
    print(f"  {name}: {time.perf_counter() - t:.3f} s {how}")
PY
for round in $(seq "$ROUNDS"); do
    start=$(date +%s%N)
    timeout 120 python3 -c "import torch"
    echo "import_torch $(( ($(date +%s%N) - start) / 1000000 ))" >>"$OUT/times.txt"
    n=${#TREES[@]}  # each round starts with the next version: no version always runs first
    ORDER=("${TREES[@]:$((round % n))}" "${TREES[@]:0:$((round % n))}")
    for tree in "${ORDER[@]}"; do
        label=${tree%%=*}
        start=$(date +%s%N)
        (cd "/tmp/ab/$label" && PYTHONPATH="/tmp/ab/$label:/tmp/site" timeout 300 python3 -m fleet \
            probe -i inventory/local.yaml --no-allreduce --no-save \
            --json "/tmp/ab/run_${label}_$round.json" >"/tmp/ab/out_${label}_$round.txt" 2>&1)
        rc=$?
        echo "$label $(( ($(date +%s%N) - start) / 1000000 )) rc=$rc" >>"$OUT/times.txt"
    done
    for tree in "${ORDER[@]}"; do
        label=${tree%%=*}
        start=$(date +%s%N)
        timeout 300 python3 - <"/tmp/ab/bundle_$label.py" >/tmp/ab/bundle_out.txt 2>&1
        rc=$?
        echo "alone_$label $(( ($(date +%s%N) - start) / 1000000 )) rc=$rc" >>"$OUT/times.txt"
    done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
from collections import defaultdict
from pathlib import Path
out = Path(sys.argv[1])
walls = defaultdict(list)
for line in (out / "times.txt").read_text().splitlines():
    label, seconds = line.split()[:2]
    walls[label].append(float(seconds) / 1000)  # written in ms
bare = walls.pop("import_torch")
torch = statistics.median(bare)
print(f"import torch: median {torch:.2f} s  all {[round(w, 2) for w in bare]}")
for label, times in walls.items():
    median = statistics.median(times)
    print(f"{label:6} median {median:.2f} s ({median / torch:.2f}x import torch)  all {[round(t, 2) for t in times]}")
    probes = defaultdict(list)
    for run in sorted(Path("/tmp/ab").glob(f"run_{label}_*.json")):
        for outcome in json.loads(run.read_text())["hosts"].values():
            for name, result in outcome["probes"].items():
                probes[name].append(result.get("elapsed_s") or 0)
            probes["(host)"].append(outcome.get("elapsed_s") or 0)
    print("        per probe, median s: " + ", ".join(
        f"{n} {statistics.median(v):.2f}" for n, v in sorted(probes.items(), key=lambda i: -statistics.median(i[1]))))
PY
