#!/usr/bin/env bash
# Per-host cost on a real GPU host (issue 7, part 3): the full bundle without allreduce, against a
# bare `import torch` and against `python -m torch.utils.collect_env`, 3 runs each, same call.
#   OUT=/tmp/out bash bench/device_bundle_cost.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Dependencies the image lacks travel as wheels in .whl (jmespath); click, yaml, rich are there.
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/fleet-out}
mkdir -p "$OUT"
TIMEFORMAT="%R"
measure() {  # label, command...
    local label=$1; shift
    for i in 1 2 3; do
        { time "$@" >/dev/null 2>&1; } 2>>"$OUT/times_$label.txt"
    done
    echo "$label: $(tr '\n' ' ' <"$OUT/times_$label.txt")s"
}
python3 -c "import torch" # warm the page cache once, so every tool below starts warm
measure import_torch python3 -c "import torch"
measure collect_env python3 -m torch.utils.collect_env
measure fleet_bundle python3 -m fleet probe -i inventory/local.yaml --no-allreduce --no-save
python3 -m fleet probe -i inventory/local.yaml --no-allreduce --no-save --json "$OUT/bundle_run.json" >/dev/null 2>&1
python3 - "$OUT/bundle_run.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
for host, outcome in run["hosts"].items():
    print(host, outcome["status"], f"{outcome['elapsed_s']:.2f}s",
          {p: r["elapsed_s"] for p, r in outcome["probes"].items()})
PY
