#!/usr/bin/env bash
# fleet on a real GPU host, run the way its users run it (issue 45): no interpreter named, no
# inventory, nothing set up for fleet beyond installing it.
#
#   1. from the environment that holds torch (the python3 first on PATH):
#      a. `python3 -m fleet probe` with this checkout on PYTHONPATH;
#      b. fleet installed into that environment (`python3 -m pip install .`): `fleet probe`;
#   2. the README's first command exactly as written, in a fresh environment of fleet's own
#      (`python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/fleet probe -i ...`);
#   3. `fleet check`, `fleet check --pack health`, `fleet report` (the console script of 1b);
#   4. nothing left behind: no fleet process, no GPU memory held by one.
#
# Each command: its first 15 lines at 80 columns, exit code and wall time, in $OUT/acceptance.txt
# (and on stdout). The full outputs and the runs' JSON go to $OUT too (at most 8 files). The last
# line is the verdict; the script exits 1 when a step failed or something was left behind.
#
#   OUT=/tmp/out bash bench/device_acceptance.sh
#
# The GPU host has no internet: fleet's dependencies travel as wheels in .whl/ (README of the
# device tool), found by pip through PIP_FIND_LINKS with PIP_NO_INDEX. The README's command itself
# is run unchanged. Needs: bash, coreutils `timeout`, python3 (3.9+) on PATH; a GPU is optional.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export COLUMNS=80 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
if [ -d .whl ]; then
    export PIP_NO_INDEX=1 PIP_FIND_LINKS=$REPO/.whl
    # `pip install .` builds fleet in an isolated environment, which needs the build backend too
    if ! compgen -G ".whl/setuptools-*.whl" >/dev/null; then
        echo "warning: .whl/ has no setuptools wheel; pip cannot build fleet offline." \
            "Add it: pip download -d .whl 'setuptools>=64' wheel" >&2
    fi
fi
OUT=${OUT:-/tmp/fleet-acceptance}
mkdir -p "$OUT"
REPORT=$OUT/acceptance.txt
FULL=$OUT/outputs.txt
: >"$REPORT"
: >"$FULL"
LIMIT_S=240  # one command's wall limit: the whole script stays well under 5 minutes

FAILED=()  # the labels of the steps that did not exit 0
say() { echo "$*" | tee -a "$REPORT"; }

# step LABEL COMMAND...: run it (bounded), keep its whole output, show its head and how it ended
step() {
    local label=$1; shift
    local started ended code log
    log=$(mktemp)
    started=$(date +%s.%N)
    timeout -k 5 "$LIMIT_S" "$@" >"$log" 2>&1
    code=$?
    ended=$(date +%s.%N)
    say "=== $label"
    say "\$ $*"
    # a command that installs first (the README's): its head is what fleet printed, after pip
    local from
    from=$(grep -n -e '^Successfully installed' "$log" | tail -1 | cut -d: -f1)
    tail -n +"$(( ${from:-0} + 1 ))" "$log" | head -n 15 | tee -a "$REPORT"
    [ "$code" -eq 0 ] || FAILED+=("$label (exit $code)")
    say "--- exit $code, wall $(python3 -c "print(f'{$ended - $started:.2f}')") s, $(wc -l <"$log") lines"
    say ""
    { echo "=== $label"; echo "\$ $*"; cat "$log"; echo "--- exit $code"; echo; } >>"$FULL"
    rm -f "$log"
}

say "host: $(hostname), $(nproc) CPUs; python3 on PATH: $(command -v python3) ($(python3 -V 2>&1))"
say "torch there: $(python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count(), "GPU(s)")' 2>&1 | tail -1)"
say "GPUs: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sort | uniq -c | tr -s ' ' | paste -sd ';')"
say ""

# A user's own state, fresh: saved runs, known_hosts, the ssh config of this run only.
HOME=$(mktemp -d)
export HOME
unset VIRTUAL_ENV

# 1a. the checkout on PYTHONPATH, from the torch environment; its dependencies from the wheels
SITE=$(mktemp -d)
python3 -m pip install -q --no-deps --target "$SITE" "$REPO"/.whl/*.whl >/dev/null 2>&1 || true
step "1a torch env: python3 -m fleet probe (checkout on PYTHONPATH)" \
    env PYTHONPATH="$REPO:$SITE" python3 -m fleet probe --json "$OUT/probe_torch_env.json"
rm -rf "$SITE"

# 1b. fleet installed into the torch environment (its console script beside that python3)
TORCH_BIN=$(dirname "$(command -v python3)")
PIP_LOG=$(mktemp)
if python3 -m pip install -q "$REPO" >"$PIP_LOG" 2>&1; then
    step "1b torch env: fleet probe (installed console script)" "$TORCH_BIN/fleet" probe
else
    say "=== 1b: fleet could not be installed into $(command -v python3)'s environment; pip said:"
    grep -v '^WARNING' "$PIP_LOG" | tail -n 5 | tee -a "$REPORT"
    FAILED+=("1b: pip install into the torch environment")
fi
rm -f "$PIP_LOG"

# 2. the README's first command, exactly as written, in a clean copy of the checkout
CLONE=$(mktemp -d)/fleet
cp -r "$REPO" "$CLONE"
rm -rf "$CLONE/.venv" "$CLONE/.whl"
readme_first=$(awk '/^## Set-up/{s=1} s && /^```bash/{getline; print; exit}' README.md)
say "README's first command: $readme_first"
cd "$CLONE"  # not in a subshell: a failed step is counted in FAILED
step "2 fleet's own fresh environment: the README's first command" bash -c "$readme_first"
cd "$REPO"

# 3. the verdicts and the report, with the console script installed in 1b
FLEET="$TORCH_BIN/fleet"
[ -x "$FLEET" ] || FLEET="$CLONE/.venv/bin/fleet"
step "3a fleet check" "$FLEET" check --json "$OUT/check.json"
step "3b fleet check --pack health" "$FLEET" check --pack health
step "3c fleet report" "$FLEET" report -o "$OUT/report.html"
rm -f "$OUT/report.html"  # its size and that it was written is what matters here

# 4. nothing left behind
sleep 1
left=$(pgrep -af 'fleet|_host_runner|fleet-launch|fleet bundle' | grep -v -e pgrep -e device_acceptance || true)
held=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null || true)
say "=== 4 left behind"
say "processes: ${left:-none}"
say "GPU memory held by processes: ${held:-none}"
rm -rf "$(dirname "$CLONE")" "$HOME"
[ -z "$left" ] || FAILED+=("4: fleet processes left running")
[ -z "$held" ] || FAILED+=("4: GPU memory still held")

say ""
if [ ${#FAILED[@]} -eq 0 ]; then
    say "verdict: every step exited 0 and nothing was left behind"
else
    say "verdict: FAILED: ${#FAILED[@]} step(s)"
    printf '  - %s\n' "${FAILED[@]}" | tee -a "$REPORT"
    exit 1
fi
