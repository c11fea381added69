#!/usr/bin/env bash
# The net probe for real on the lent GPU host (local transport: no sshd there): the probe by hand
# three times (its cost), this host's /sys/class/net as a golden capture, the RDMA facts beside
# it, `fleet probe -p net,gpu,system,nccl` as a saved run document and `fleet check` on it.
#   OUT=/tmp/out bash bench/device_net.sh
set -uo pipefail
# The lender's policy: NVLink multicast stays off in NCCL, PyTorch and NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then  # what the image lacks (asyncssh, jmespath, ClusterShell)
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:/tmp/site" COLUMNS=100
OUT=${OUT:-/tmp/fleet-out}
mkdir -p "$OUT"
{
    echo "uname -r: $(uname -r)"
    echo "/proc/sys/kernel/osrelease: $(cat /proc/sys/kernel/osrelease 2>&1)"
    echo "/proc/driver/nvidia/version: $(head -1 /proc/driver/nvidia/version 2>&1)"
    echo "ls -la /sys/class/infiniband:"; ls -la /sys/class/infiniband 2>&1
    echo "ls -la /dev/infiniband:"; ls -la /dev/infiniband 2>&1
    echo "ls -la /sys/class/net:"; ls -la /sys/class/net 2>&1
    echo "/proc/modules (rdma, mlx, nvidia, efa):"; grep -E "rdma|mlx|ib_|nvidia|efa|peer" /proc/modules 2>&1
    echo "ls /sys/module | wc -l: $(ls /sys/module 2>/dev/null | wc -l)"
    echo "ldconfig -p | grep -i nccl:"; ldconfig -p 2>&1 | grep -i nccl
} >"$OUT/host_facts.txt"
cat "$OUT/host_facts.txt"
for i in 1 2 3; do
    python3 - "$OUT/net_by_hand.json" <<'PY'
import subprocess, sys, time
start = time.perf_counter()
done = subprocess.run([sys.executable, "probes/net.py"], capture_output=True, text=True, timeout=60)
took = time.perf_counter() - start
open(sys.argv[1], "w").write(done.stdout)
print(f"probes/net.py by hand: {took:.3f} s, rc={done.returncode}, stderr={done.stderr[-300:]!r}")
PY
done
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; print(d["rdma"]["summary"]); print("probe timings", d["timings_s"])' "$OUT/net_by_hand.json"
python3 -m tests.probes.net_trees capture-net >"$OUT/h200_sys_class_net.json"
TIMEFORMAT="%R s"
echo -n "fleet probe -p net: "
time python3 -m fleet probe -p net --json /tmp/run_net_only.json --runs-dir /tmp/fleet-runs >/dev/null 2>&1
echo -n "fleet probe -p net,gpu,system,nccl: "
time python3 -m fleet probe -p net,gpu,system,nccl --json "$OUT/run_net.json" \
    --runs-dir /tmp/fleet-runs >"$OUT/fleet_probe_net.txt" 2>&1
echo "exit code $?"
cat "$OUT/fleet_probe_net.txt"
python3 -m fleet check --run "$OUT/run_net.json" >"$OUT/fleet_check.txt" 2>&1
echo "fleet check exit code $?"
grep -E "net-|check" "$OUT/fleet_check.txt"
