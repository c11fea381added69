#!/usr/bin/env bash
# `fleet fabric` on the 2×H200 host (no sshd there): two local-transport "hosts", one GPU each
# (inventory probe_args fabric.devices), NCCL backend. Twice: NCCL forced onto sockets
# (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, and NCCL_IB_DISABLE=1 so no IB NIC is used either), then
# unforced (NVLink). Each time, in the same call and the same environment, the plain
# torch.distributed loop bench/allreduce_reference.py --world 2. Prints busbw at 256 MiB, fabric vs
# reference, both ways, into $OUT/fabric_summary.txt (and stdout); raw JSON beside it.
#   OUT=/tmp/out bash bench/device_fabric.sh        # ~1-2 minutes; at most 4 (timeouts)
set -uo pipefail
# The lender's policy: NVLink multicast stays off in NCCL, PyTorch and NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:/tmp/site" COLUMNS=160
OUT=${OUT:-/tmp/fleet-out}
mkdir -p "$OUT"
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.device_count())"

inventory="$OUT/fabric_inventory.yaml"
cat >"$inventory" <<YAML
defaults: {python: $(command -v python3)}
hosts:
  gpu0: {transport: local, probe_args: {fabric: {devices: [0]}}}
  gpu1: {transport: local, probe_args: {fabric: {devices: [1]}}}
YAML

SIZES_HUMAN=8,64K,1M,16M,256M
SIZES_BYTES=8,65536,1048576,16777216,268435456
TIMEFORMAT="%R s"
for mode in sockets nvlink; do
    if [ "$mode" = sockets ]; then
        forced=(env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1)
    else
        forced=(env)
    fi
    echo "== $mode: fleet fabric"
    time "${forced[@]}" timeout 60 python3 -m fleet fabric -i "$inventory" --sizes "$SIZES_HUMAN" \
        --pairs one --no-group --timeout 50 --no-save --json "$OUT/fabric_$mode.json" \
        >"$OUT/fabric_$mode.txt" 2>&1
    echo "exit code $?"
    cat "$OUT/fabric_$mode.txt"
    echo "== $mode: reference"
    time "${forced[@]}" timeout 60 python3 bench/allreduce_reference.py --world 2 \
        --sizes "$SIZES_BYTES" --json "$OUT/reference_$mode.json" 2>"$OUT/reference_$mode.err"
    echo "exit code $?"
done

python3 - "$OUT" <<'PY' | tee "$OUT/fabric_summary.txt"
import json, os, sys
out = sys.argv[1]
size = 256 << 20
for mode in ("sockets", "nvlink"):
    try:
        fabric = json.load(open(os.path.join(out, f"fabric_{mode}.json")))["fabric"]
        pair = fabric["pairs"][0]
        mine = next((r["busbw_gbps"] for r in pair["sizes"] if r["bytes"] == size), None)
        env = {k: v for k, v in fabric["env"].get("gpu0", {}).items() if k.startswith("NCCL_")}
    except (OSError, KeyError, IndexError, ValueError) as exc:
        mine, pair, env = None, {"status": f"no result ({exc!r})"}, {}
    try:
        rows = json.load(open(os.path.join(out, f"reference_{mode}.json")))["results"]
        ref = next((r["busbw_gbps"] for r in rows if r["bytes"] == size), None)
    except (OSError, KeyError, ValueError):
        ref = None
    ratio = f"{mine / ref:.3f}" if mine and ref else "n/a"
    print(f"{mode:8} 256 MiB busbw: fleet fabric {mine} GB/s ({pair.get('status')}, "
          f"latency {pair.get('latency_us')} us at 8 B), reference {ref} GB/s, ratio {ratio}")
    print(f"{'':8} NCCL env of the ranks: {env}")
PY
