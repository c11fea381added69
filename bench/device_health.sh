#!/usr/bin/env bash
# The health probe for real on the lent GPU host (local transport: no sshd there): the probe by
# hand three times (its cost), `fleet probe -p health` as a saved run document, and `fleet check`
# on it; raw captures beside them. Everything lands in $OUT.
#   OUT=/tmp/out bash bench/device_health.sh
set -uo pipefail
# The lender's policy: NVLink multicast stays off in NCCL, PyTorch and NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then  # what the image lacks (asyncssh, jmespath, ClusterShell)
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:/tmp/site" COLUMNS=100
OUT=${OUT:-/tmp/fleet-out}
mkdir -p "$OUT"
nvidia-smi -q -x >"$OUT/nvidia-smi_-q_-x.xml"
nvidia-smi -L >"$OUT/nvidia-smi_-L.txt"
for i in 1 2 3; do
    python3 - "$OUT/health_by_hand_$i.json" <<'PY'
import subprocess, sys, time
start = time.perf_counter()
done = subprocess.run([sys.executable, "probes/health.py"], capture_output=True, text=True, timeout=60)
took = time.perf_counter() - start
open(sys.argv[1], "w").write(done.stdout)
print(f"probes/health.py by hand: {took:.3f} s, rc={done.returncode}, stderr={done.stderr[-300:]!r}")
PY
done
TIMEFORMAT="%R s"
echo -n "fleet probe -p health: "
time python3 -m fleet probe -p health --json "$OUT/run_health.json" --runs-dir /tmp/fleet-runs \
    >"$OUT/fleet_probe_health.txt" 2>&1
echo "exit code $?"
cat "$OUT/fleet_probe_health.txt"
echo -n "fleet probe --no-allreduce (every default probe): "
time python3 -m fleet probe --no-allreduce --json "$OUT/run_default.json" --runs-dir /tmp/fleet-runs \
    >"$OUT/fleet_probe_default.txt" 2>&1
echo "exit code $?"
python3 -m fleet check --run "$OUT/run_default.json" >"$OUT/fleet_check.txt" 2>&1
echo "fleet check exit code $?"
cat "$OUT/fleet_check.txt"
python3 -m fleet check --run "$OUT/run_default.json" --format json >"$OUT/fleet_check.json" 2>/dev/null
