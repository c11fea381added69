#!/usr/bin/env bash
# Runs fleet's probes for real on a GPU host (the lent 2×H200 machine, local transport: no sshd
# there) and packs raw nvidia-smi captures, each probe's JSON, a full `fleet probe` run and the
# plain torch.distributed allreduce reference into $OUT/results.tgz.
#   OUT=/tmp/out bash bench/device_run.sh
set -uo pipefail
# The lender's policy: NVLink multicast stays off in NCCL, PyTorch and NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Dependencies the image lacks travel as wheels in .whl (jmespath); click, yaml, rich are there.
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:/tmp/site" COLUMNS=160
OUT=${OUT:-/tmp/fleet-out}
cap="$OUT/cap"
mkdir -p "$cap"
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.device_count())"

query=index,name,uuid,pci.bus_id,driver_version,compute_cap,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode,mig.mode.current
nvidia-smi --query-gpu=$query --format=csv >"$cap/nvidia-smi_query-gpu.csv"
nvidia-smi -q >"$cap/nvidia-smi_-q.txt"
nvidia-smi -L >"$cap/nvidia-smi_-L.txt"
nvidia-smi topo -m >"$cap/nvidia-smi_topo_-m.txt"
nvidia-smi topo -p2p r >"$cap/nvidia-smi_topo_-p2p_r.txt"
nvidia-smi >"$cap/nvidia-smi.txt"
ldconfig -p | grep -i nccl >"$cap/ldconfig_nccl.txt"

TIMEFORMAT="%R s"
for probe in system packages imports dir gpu torch nccl allreduce; do
    echo -n "probe $probe by hand: "
    time timeout 150 python3 "probes/$probe.py" >"$cap/probe_$probe.json" 2>"$cap/probe_$probe.err"
done

echo -n "fleet probe -i inventory/local.yaml: "
time python3 -m fleet probe -i inventory/local.yaml --json "$cap/run.json" \
    --runs-dir /tmp/fleet-runs >"$cap/fleet_probe.txt" 2>&1
echo "exit code $?"
cat "$cap/fleet_probe.txt"

python3 bench/allreduce_reference.py --json "$cap/reference.json" 2>"$cap/reference.err"
echo "reference: rc=$?"
python3 bench/allreduce_reference.py --compare "$cap/run.json" --reference "$cap/reference.json"
echo "compare: rc=$?"

tar czf "$OUT/results.tgz" -C "$OUT" cap && rm -rf "$cap"
