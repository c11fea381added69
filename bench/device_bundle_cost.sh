#!/usr/bin/env bash
# What the default bundle costs on a real GPU host (issue 45): `fleet probe --no-allreduce` on this
# machine (no interpreter named: fleet chooses the python3 with torch) against a bare
# `python3 -c "import torch"`, ROUNDS interleaved rounds in one call, each command's median; then
# where the time goes: the bundle's timeline (bench/bundle_timeline.py, the runner and each probe),
# the controller's phases (bench/controller_phases.py) and its own imports (`python3 -X importtime`, the 15 costliest).
#
#   OUT=/tmp/out bash bench/device_bundle_cost.sh        # ROUNDS=3 by default
#
# Run from the environment that holds torch; fleet's dependencies may travel as wheels in .whl/.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SITE=$(mktemp -d)
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl >/dev/null 2>&1
fi
export PYTHONPATH="$PWD:$SITE" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/fleet-out}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
RUNS=$(mktemp -d)

seconds() {  # the wall time of a command, in seconds, its output discarded
    local started ended
    started=$(date +%s.%N)
    timeout -k 5 120 "$@" >/dev/null 2>&1
    ended=$(date +%s.%N)
    python3 -c "print(f'{$ended - $started:.3f}')"
}

python3 -c "import torch" # the page cache warm once, so every command below starts warm
torch_s=() fleet_s=()
for round in $(seq "$ROUNDS"); do
    torch_s+=("$(seconds python3 -c 'import torch')")
    fleet_s+=("$(seconds python3 -m fleet probe --no-allreduce --runs-dir "$RUNS")")
    echo "round $round: import torch ${torch_s[-1]} s, fleet probe --no-allreduce ${fleet_s[-1]} s"
done
python3 - "${torch_s[*]}" "${fleet_s[*]}" <<'PY'
import statistics, sys
torch, fleet = ([float(x) for x in arg.split()] for arg in sys.argv[1:3])
ratios = [f / t for f, t in zip(fleet, torch)]
print(f"median: import torch {statistics.median(torch):.2f} s, bundle {statistics.median(fleet):.2f} s,"
      f" ratio of medians {statistics.median(fleet) / statistics.median(torch):.2f}x;"
      f" per round {', '.join(f'{r:.2f}x' for r in ratios)}")
PY

echo "--- the bundle's timeline (runner, preloader, each probe; seconds since the interpreter started)"
timeout -k 5 120 python3 bench/bundle_timeline.py --runs 2 2>&1 | tail -40

echo "--- the controller's phases (bench/controller_phases.py, medians of 3)"
timeout -k 5 90 python3 bench/controller_phases.py --runs 3 --no-allreduce --runs-dir "$RUNS" 2>&1 | tail -7

echo "--- the controller's costliest imports (python3 -X importtime, cumulative us)"
timeout -k 5 60 python3 -X importtime -m fleet probe -p system --runs-dir "$RUNS" 2>"$OUT/importtime.txt" >/dev/null
sort -t'|' -k2 -n -r "$OUT/importtime.txt" | head -15
python3 - "$RUNS" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(sys.argv[1] + "/*.json"))[-1:]:
    for host, outcome in json.load(open(path))["hosts"].items():
        print("last run's probes:", host, outcome["status"], {p: r["elapsed_s"] for p, r in outcome["probes"].items()})
PY
rm -rf "$RUNS" "$SITE"
