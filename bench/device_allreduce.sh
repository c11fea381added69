#!/usr/bin/env bash
# One call on the lent 2×H200 host (local transport, no network; about 5 minutes):
#   1. the allreduce matrix through fleet, timed (target: the matrix under 60 s on 2 GPUs); its run
#      document is $OUT/h200x2_matrix_run.json (the golden file tests/probes/golden/real_run/ keeps);
#   2. the default allreduce probe and the plain torch.distributed reference, 3 times each,
#      alternating: 8 B eager latency (median, min–max) and 256 MiB busbw side by side, with ratios.
#   OUT=/tmp/out bash bench/device_allreduce.sh
set -uo pipefail
# The lender's policy: NVLink multicast stays off in NCCL, PyTorch and NVSHMEM (the probe forces the
# same in every rank it starts; exported here for the reference too).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then  # dependencies the image lacks travel as wheels
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:/tmp/site" COLUMNS=160
OUT=${OUT:-/tmp/fleet-out}
mkdir -p "$OUT"
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__,
'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())" 2>&1

echo "== 1. the matrix: fleet probe -p allreduce --allreduce-matrix"
started=$(date +%s.%N)
timeout 280 python3 -m fleet probe -i inventory/local.yaml -p allreduce --allreduce-matrix \
    --no-save --json "$OUT/h200x2_matrix_run.json" >"$OUT/matrix_probe.txt" 2>&1
echo "fleet probe: rc=$? wall $(python3 -c "import time; print(round(time.time() - $started, 1))") s"
cat "$OUT/matrix_probe.txt"
python3 - "$OUT/h200x2_matrix_run.json" <<'PY'
import json, sys
try:
    run = json.load(open(sys.argv[1]))
except Exception as exc:  # noqa: BLE001 - report, never stop the script
    sys.exit(f"no run document: {exc}")
for host, outcome in run["hosts"].items():
    result = outcome["probes"].get("allreduce") or {}
    data = result.get("data") or {}
    matrix = data.get("matrix") or {}
    print(f"{host}: probe {result.get('status')} in {result.get('elapsed_s')} s; matrix "
          f"{matrix.get('elapsed_s')} s (budget {matrix.get('budget_s')}), stopped early: "
          f"{matrix.get('stopped_early')}")
    for name, v in sorted((matrix.get("variants") or {}).items()):
        where = ", ".join(v.get("failed_at") or [])
        print(f"  {name:34} {v.get('status')!s:8} {v.get('elapsed_s') or 0:6.2f} s  {where}  "
              f"{(v.get('error') or '')[:150]}")
        for row in v.get("rows") or []:
            print(f"      {row.get('mode')!s:5} {row.get('bytes')!s:>10} B "
                  f"{row.get('latency_us')!s:>10} us [{row.get('latency_us_min')}-"
                  f"{row.get('latency_us_max')}] busbw {row.get('busbw_gbps')} "
                  f"ratio {row.get('ratio')} correct {row.get('correct')}")
    print("  winners:", json.dumps(matrix.get("winners"), indent=1))
PY

echo "== 2. default probe vs reference, alternating, 5 pairs"
RUNS="1 2 3 4 5"
for i in $RUNS; do
    timeout 150 python3 probes/runner/_by_hand.py allreduce >"$OUT/probe_$i.json" 2>"$OUT/probe_$i.err"
    echo "probe $i: rc=$?"
    timeout 150 python3 bench/allreduce_reference.py \
        --json "$OUT/reference_$i.json" 2>"$OUT/reference_$i.err"
    echo "reference $i: rc=$?"
done
python3 - "$OUT" $RUNS <<'PY'
import json, os, sys

def row(rows, size, mode="eager"):
    return next((r for r in rows if r["bytes"] == size and r.get("mode", "eager") == mode), {})

def load(path):
    try:
        return json.load(open(path))
    except Exception as exc:  # noqa: BLE001 - report, never stop the script
        print(f"{path}: {exc}")
        return {}

print(f"{'run':4} {'probe 8B eager us (min-max)':30} {'ref 8B us (min-max)':24} {'ratio':6} "
      f"{'probe 256MiB busbw':18} {'ref busbw':10} {'ratio':6} {'probe graph 8B us':18}")
for i in sys.argv[2:]:
    probe = (load(os.path.join(sys.argv[1], f"probe_{i}.json")).get("data") or {}).get("results") or []
    ref = load(os.path.join(sys.argv[1], f"reference_{i}.json")).get("results") or []
    p8, r8 = row(probe, 8), row(ref, 8)
    pb, rb = row(probe, 256 << 20), row(ref, 256 << 20)
    g8 = row(probe, 8, "graph")
    lat = (p8.get("latency_us") or 0) / (r8.get("latency_us") or float("nan"))
    bw = (pb.get("busbw_gbps") or 0) / (rb.get("busbw_gbps") or float("nan"))
    print(f"{i!s:<4} {p8.get('latency_us')} ({p8.get('latency_us_min')}-{p8.get('latency_us_max')})"
          f"{'':8} {r8.get('latency_us')} ({r8.get('latency_us_min')}-{r8.get('latency_us_max')})"
          f"{'':6} {lat:6.3f} {pb.get('busbw_gbps')!s:18} {rb.get('busbw_gbps')!s:10} {bw:6.3f} "
          f"{g8.get('latency_us')}")
PY
tail -n 5 "$OUT"/probe_1.err "$OUT"/reference_1.err 2>/dev/null
# Everything in one archive (the device returns at most 8 files).
tar czf "$OUT/allreduce_runs.tgz" -C "$OUT" $(cd "$OUT" && ls probe_* reference_* 2>/dev/null) \
    && (cd "$OUT" && rm -f probe_* reference_*)
