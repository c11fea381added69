#!/usr/bin/env bash
# The gpubench probe for real on the lent GPU host (local transport: no sshd there), in one call
# (about 4 minutes on 1-2 GPUs). Everything lands in $OUT/gpubench.tgz; the fleet run document is
# also $OUT/gpubench_run.json (the golden file tests/probes/golden/real_run/ keeps).
#   1. the probe by hand, then `fleet probe -p gpubench --gpubench --json` and `fleet check` on it;
#   2. the plain torch reference (bench/gpubench_reference.py) in the same call, between two probe
#      runs, and the compare: each figure within 5%; the probe's wall time (target: <= 20 s on 2
#      GPUs);
#   3. the deadline hit on purpose (time_budget_s 5 and 9: killed while importing torch, then
#      mid-phase): it says it stopped early, no worker process is left, GPU memory is back;
#   4. a GPU made slow on purpose (a second process loading the last GPU with matmuls while the
#      probe runs): `fleet check` names it: with 2+ GPUs by gpubench-gpu-vs-host-best; with one
#      GPU by gpubench-gpu-vs-cohort, on a run whose two "hosts" are the clean and the loaded run.
#   OUT=/tmp/out bash bench/device_gpubench.sh
set -uo pipefail
# The lender's policy: NVLink multicast stays off in NCCL, PyTorch and NVSHMEM (the probe forces the
# same in every worker it starts; exported here for the reference and the loader too).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then  # dependencies the image lacks travel as wheels
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" COLUMNS=160
OUT=${OUT:-/tmp/fleet-out}
res="$OUT/gpubench"
mkdir -p "$res"
TIMEFORMAT="%R s"
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__,
'gpus', torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])" 2>&1
gpus=$(nvidia-smi -L | grep -c '^GPU ')
echo "GPUs: $gpus"
query=index,name,uuid,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,clocks_event_reasons.active,clocks.current.sm,clocks.max.sm,power.limit,memory.used
nvidia-smi --query-gpu=$query --format=csv >"$res/nvidia-smi_query-gpu_idle.csv" 2>&1
nvidia-smi -L >"$res/nvidia-smi_-L.txt"
nvidia-smi topo -m >"$res/nvidia-smi_topo_-m.txt" 2>&1
leftovers() {  # worker processes (their config carries the marker) and compute apps on the GPUs
    echo "  workers left: $(pgrep -f FLEET_GPUBENCH | tr '\n' ' ')(none if empty)"
    echo "  compute apps: $(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader | tr '\n' ';')"
    echo "  memory.used MiB: $(nvidia-smi --query-gpu=index,memory.used --format=csv,noheader | tr '\n' ';')"
}
summary() {  # the probe's own account of one run: python3 - FILE (a probe result or a run)
    python3 - "$1" <<'PY'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as exc:  # noqa: BLE001 - report, never stop the script
    sys.exit(f"  no result: {exc}")
result = doc["hosts"]["local"]["probes"].get("gpubench", {}) if "hosts" in doc else doc
data = result.get("data") or {}
print(f"  ok/status: {result.get('ok', result.get('status'))} error: {result.get('error')}")
print(f"  elapsed {data.get('elapsed_s')} s, stopped early: {data.get('stopped_early')} "
      f"{data.get('stopped') or ''}; pairs note: {data.get('pairs_note')}")
print(f"  cleanup: {data.get('cleanup')}; sampler: {data.get('sampler')}")
for name, phase in (data.get("phases") or {}).items():
    print(f"    {name:22} {phase}")
for gpu in data.get("gpus") or []:
    print(f"  GPU{gpu['index']} {gpu['uuid']} {gpu['pci_bus_id']} {gpu['name']}: "
          f"TFLOPS {gpu['tflops']} GB/s {gpu['gbps']}")
    print(f"    load {gpu.get('load')}")
    if gpu.get("error") or gpu.get("warning"):
        print(f"    error {gpu.get('error')} warning {gpu.get('warning')}")
    for dtype, detail in (gpu.get("matmul") or {}).items():
        print(f"    {dtype}: {detail}")
for pair in data.get("pairs") or []:
    print(f"  GPU{pair['src']}->GPU{pair['dst']} peer {pair['peer_access']}: {pair['gbps']}")
PY
}

echo "== 1. the probe by hand, then fleet probe -p gpubench --gpubench, fleet check"
leftovers
echo -n "probes/gpubench.py by hand: "
time timeout 150 python3 probes/runner/_by_hand.py gpubench >"$res/probe_by_hand_1.json" 2>"$res/probe_by_hand_1.err"
summary "$res/probe_by_hand_1.json"
echo -n "fleet probe -p gpubench --gpubench: "
time timeout 250 python3 -m fleet probe -i inventory/local.yaml -p gpubench --gpubench --no-save \
    --json "$res/gpubench_run.json" >"$res/fleet_probe.txt" 2>&1
echo "  exit code $?"
cat "$res/fleet_probe.txt"
summary "$res/gpubench_run.json"
timeout 120 python3 -m fleet check --run "$res/gpubench_run.json" --pack inference \
    >"$res/fleet_check.txt" 2>&1
echo "fleet check: exit code $?"
grep -A4 'gpubench-' "$res/fleet_check.txt"
leftovers

echo "== 2. the plain torch reference in the same call, then the compare (5%)"
echo -n "bench/gpubench_reference.py: "
time timeout 300 python3 bench/gpubench_reference.py --json "$res/reference.json" \
    2>"$res/reference.err"
echo "  rc=$?"
tail -n 5 "$res/reference.err"
echo -n "probes/gpubench.py by hand, after the reference: "
time timeout 150 python3 probes/runner/_by_hand.py gpubench >"$res/probe_by_hand_2.json" 2>"$res/probe_by_hand_2.err"
python3 - "$res" <<'PY'
import json, os, sys
for name in ("probe_by_hand_1", "probe_by_hand_2"):  # a run document around each by-hand result
    try:
        result = json.load(open(os.path.join(sys.argv[1], name + ".json")))
    except Exception as exc:  # noqa: BLE001
        print(f"{name}: {exc}")
        continue
    run = {"hosts": {"local": {"probes": {"gpubench": {
        "status": "ok" if result["ok"] else "absent", "elapsed_s": None, "data": result["data"]}}}}}
    json.dump(run, open(os.path.join(sys.argv[1], name + "_run.json"), "w"))
PY
for run in gpubench_run probe_by_hand_1_run probe_by_hand_2_run; do
    echo "-- $run against the reference"
    timeout 60 python3 bench/gpubench_reference.py --compare "$res/$run.json" \
        --reference "$res/reference.json"
    echo "  compare rc=$?"
done

echo "== 3. the deadline hit on purpose: nothing left behind"
for budget in 5 9; do
    leftovers
    echo -n "time_budget_s $budget: "
    time timeout 60 python3 probes/runner/_by_hand.py gpubench "{\"time_budget_s\": $budget}" \
        >"$res/probe_deadline_$budget.json" 2>"$res/probe_deadline_$budget.err"
    summary "$res/probe_deadline_$budget.json"
    leftovers
    sleep 1
    echo "  one second later:"
    leftovers
done

echo "== 4. a GPU made slow on purpose: a second process loading GPU $((gpus - 1))"
timeout 120 python3 bench/gpubench_reference.py --load $((gpus - 1)) --seconds 75 \
    >"$res/loader.txt" 2>&1 &
loader=$!
sleep 12  # its torch import and first matmuls
echo -n "fleet probe -p gpubench --gpubench, GPU $((gpus - 1)) loaded: "
time timeout 250 python3 -m fleet probe -i inventory/local.yaml -p gpubench --gpubench --no-save \
    --json "$res/loaded_run.json" >"$res/fleet_probe_loaded.txt" 2>&1
kill "$loader" 2>/dev/null
wait "$loader" 2>/dev/null
cat "$res/loader.txt"
cat "$res/fleet_probe_loaded.txt"
summary "$res/loaded_run.json"
timeout 120 python3 -m fleet check --run "$res/loaded_run.json" --pack inference \
    >"$res/fleet_check_loaded.txt" 2>&1
echo "fleet check (loaded): exit code $?"
grep -A4 'gpubench-' "$res/fleet_check_loaded.txt"
# One GPU has no twin on its host: the clean and the loaded run become two hosts of one run, and
# the loaded GPU must fall below the median of the model's GPUs (gpubench-gpu-vs-cohort).
python3 - "$res" <<'PY'
import json, os, sys
res = sys.argv[1]
try:
    clean = json.load(open(os.path.join(res, "gpubench_run.json")))
    loaded = json.load(open(os.path.join(res, "loaded_run.json")))
except Exception as exc:  # noqa: BLE001
    sys.exit(f"no runs to merge: {exc}")
clean["hosts"] = {"h200-clean": clean["hosts"]["local"], "h200-loaded": loaded["hosts"]["local"]}
for name, outcome in clean["hosts"].items():
    outcome["name"] = name
json.dump(clean, open(os.path.join(res, "clean_and_loaded_run.json"), "w"))
PY
timeout 120 python3 -m fleet check --run "$res/clean_and_loaded_run.json" --pack inference \
    >"$res/fleet_check_clean_and_loaded.txt" 2>&1
echo "fleet check (clean and loaded as two hosts): exit code $?"
grep -A6 'gpubench-' "$res/fleet_check_clean_and_loaded.txt"
timeout 60 python3 -m fleet show "$res/clean_and_loaded_run.json" 2>&1 | sed -n '/gpubench/,$p'
leftovers

cp "$res/gpubench_run.json" "$OUT/gpubench_run.json" 2>/dev/null
tar czf "$OUT/gpubench.tgz" -C "$OUT" gpubench && rm -rf "$res"
