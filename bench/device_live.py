"""On a lent GPU host: the `live` probe against a real 1-rank NCCL job, stopped, and gone.

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    python3 bench/device_live.py --out "$OUT"

Starts `timeout 120 python3 -c JOB` in its own session: torch.distributed with the NCCL backend,
world_size 1 (one GPU cannot hold two ranks of one communicator), allreducing in a loop. Once it
is in the loop: captures its /proc maps (the libnccl/libcudart/libcuda lines), environ (allowed
names only, secret-named values masked), status, cmdline and thread names; runs the probe by
hand, timed (JSON RAS), and again asking RAS for the text report. Then SIGSTOPs the job, probes
again (its RAS cannot answer: the probe must say so in seconds), SIGCONTs and SIGKILLs the job's
process group, and probes with no job three times, timed. Every process it started is ended on
every way out. Writes at most 8 files to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "probes" / "live.py"
SAFETY = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
JOB = r"""
import os, sys, time
import torch, torch.distributed as dist
torch.cuda.set_device(0)
url = "tcp://127.0.0.1:%s" % os.environ["JOB_PORT"]
try:
    dist.init_process_group("nccl", init_method=url, rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
except TypeError:  # a torch without device_id
    dist.init_process_group("nccl", init_method=url, rank=0, world_size=1)
x = torch.ones(1 << 20, device="cuda")
for i in range(20):
    dist.all_reduce(x)
torch.cuda.synchronize()
print("looping", os.getpid(), flush=True)
while True:
    dist.all_reduce(x)
    torch.cuda.synchronize()
    time.sleep(0.002)
"""
# --standin: a dry run of this script on a machine without a GPU (NOT an NCCL job): a process
# that maps a built stand-in libnccl and names a thread "NCCL RAS" (tests/probes/standin_job.py).
STANDIN = r"""
import mmap, os, sys, threading, time
sys.path.insert(0, %r)
from tests.probes.elf_builder import build_elf
from tests.probes.standin_job import named_thread
path = "/tmp/fleet-standin/libnccl.so.2"
os.makedirs(os.path.dirname(path), exist_ok=True)
open(path, "wb").write(build_elf())
mapped = mmap.mmap(os.open(path, os.O_RDONLY), 0, prot=mmap.PROT_READ)
ready = threading.Event()
threading.Thread(target=named_thread, args=("NCCL RAS", threading.Event(), ready), daemon=True).start()
ready.wait(10)
print("looping", os.getpid(), flush=True)
time.sleep(110)
"""
LIBRARY_LINE = re.compile(r"/lib(nccl|cudart|cuda)\.so[.\d]*( \(deleted\))?$")
ENV_KEEP = re.compile(
    r"^(NCCL_|CUDA_|TORCH_|NVSHMEM_|LD_LIBRARY_PATH$|LD_PRELOAD$|MASTER_|RANK$|WORLD_SIZE$|LOCAL_)"
)
SECRET_NAME = re.compile(r"(?i)(TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)")


def log(lines: list[str], text: str) -> None:
    print(text, flush=True)
    lines.append(text)


def probe(options: dict, lines: list[str], label: str) -> tuple[dict, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(PROBE), json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    wall = time.monotonic() - started
    log(lines, f"probe {label}: exit {done.returncode}, wall {wall:.3f} s")
    if done.stderr.strip():
        log(lines, "  stderr: " + done.stderr.strip()[-1500:])
    result = json.loads(done.stdout) if done.stdout.strip() else {"error": "no output"}
    scan = (result.get("data") or {}).get("scan")
    log(lines, f"  scan: {json.dumps(scan)}")
    return result, wall


def fleet_run(out: Path, label: str, lines: list[str]) -> dict | None:
    """`fleet probe -p live,torch,nccl` through the real runner (local transport: torch is
    preloaded in its fork server, so fleet's own processes map libnccl too), then `fleet check`."""
    document = Path(f"/tmp/fleet-live-run-{label}.json")
    started = time.monotonic()
    command = ["-m", "fleet", "probe", "-i", "inventory/local.yaml", "-p", "live,torch,nccl"]
    probe_run = subprocess.run(
        [sys.executable, *command, "--no-save", "--json", str(document)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    log(
        lines,
        f"fleet probe ({label}): exit {probe_run.returncode}, {time.monotonic() - started:.1f} s",
    )
    if probe_run.returncode not in (0, 1) or not document.exists():
        log(lines, probe_run.stdout[-1500:] + probe_run.stderr[-1500:])
        return None
    check = subprocess.run(
        [sys.executable, "-m", "fleet", "check", "--run", str(document), "--pack", "inference"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "160"},
    )
    log(
        lines,
        f"fleet check ({label}): exit {check.returncode}\n{check.stdout[-4000:]}{check.stderr[-800:]}",
    )
    return dict(json.loads(document.read_text()))


def job_python_pid(timeout_pid: int) -> int | None:
    """The python under `timeout`: its child."""
    try:
        children = Path(f"/proc/{timeout_pid}/task/{timeout_pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].strip()
    except (OSError, IndexError):
        return "gone"


def capture_proc(pid: int) -> dict:
    proc = Path(f"/proc/{pid}")
    maps = [
        line for line in proc.joinpath("maps").read_text().splitlines() if LIBRARY_LINE.search(line)
    ]
    environ = []
    for entry in proc.joinpath("environ").read_bytes().split(b"\0"):
        key, _, value = entry.decode("utf-8", "replace").partition("=")
        if key and ENV_KEEP.match(key):
            environ.append(f"{key}={'***' if SECRET_NAME.search(key) else value}")
    threads = sorted(
        (proc / "task" / tid / "comm").read_text().strip() for tid in os.listdir(proc / "task")
    )
    return {
        "pid": pid,
        "maps": "\n".join(maps) + "\n",
        "environ": "\0".join(environ) + "\0",
        "status": proc.joinpath("status").read_text(),
        "cmdline": proc.joinpath("cmdline").read_bytes().decode("utf-8", "replace"),
        "thread_names": threads,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--standin", action="store_true", help="a dry run without a GPU")
    parser.add_argument("--fleet", action="store_true", help="also `fleet probe` and `check`")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    try:
        return run(args.out, STANDIN % str(REPO) if args.standin else JOB, lines, args.fleet)
    finally:
        (args.out / "log.txt").write_text("\n".join(lines) + "\n")


class Job:
    """`timeout 120 python3 -c SOURCE` in its own session; ended with its whole group."""

    def __init__(self, source: str, port: int, lines: list[str]) -> None:
        self.lines = lines
        env = {**os.environ, **SAFETY, "PYTHONUNBUFFERED": "1", "JOB_PORT": str(port)}
        self.popen = subprocess.Popen(
            ["timeout", "120", sys.executable, "-c", source],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.pid: int | None = None

    def wait_for_loop(self, limit_s: float = 100) -> int | None:
        started = time.monotonic()
        line = ""
        while time.monotonic() - started < limit_s and self.popen.stdout:
            line = self.popen.stdout.readline()
            if not line or line.startswith("looping"):
                break
            log(self.lines, "job: " + line.rstrip()[-300:])
        if not line.startswith("looping"):
            log(self.lines, "the job never reached its loop")
            return None
        self.pid = job_python_pid(self.popen.pid) or int(line.split()[1])
        log(self.lines, f"job in its loop after {time.monotonic() - started:.1f} s: pid {self.pid}")
        return self.pid

    def end(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGCONT)
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(30)
        for _ in range(100):  # the python under `timeout` is reaped by whoever adopted it
            if self.pid is None or not Path(f"/proc/{self.pid}").exists():
                break
            time.sleep(0.1)
        left = subprocess.run(
            ["pgrep", "-s", str(self.popen.pid)], capture_output=True, text=True, check=False
        )
        states = {p: _state(int(p)) for p in left.stdout.split()}
        log(self.lines, f"job {self.pid} ended; left in its session: {states or 'none'}")


def log_versions(lines: list[str]) -> None:
    versions = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__, torch.cuda.nccl.version())"],
        capture_output=True,
        text=True,
        check=False,
    )
    log(lines, "torch, nccl: " + (versions.stdout.strip() or versions.stderr.strip()[-500:]))
    try:
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
        log(lines, "nvidia-smi -L: " + smi.stdout.strip())
    except OSError as exc:
        log(lines, f"nvidia-smi -L: {exc}")


def probe_two_jobs(out: Path, second: Job, first_pid: int, lines: list[str]) -> None:
    """Both jobs looping, then the first one stopped: live_two.json."""
    if second.wait_for_loop() is None:
        return
    time.sleep(2)
    two = {"both": probe({"transcripts": True}, lines, "two jobs")}
    os.kill(first_pid, signal.SIGSTOP)
    time.sleep(1)
    two["first_stopped"] = probe({"transcripts": True}, lines, "two jobs, first stopped")
    os.kill(first_pid, signal.SIGCONT)
    (out / "live_two.json").write_text(
        json.dumps({k: r for k, (r, _) in two.items()}, indent=1, sort_keys=True)
    )


def run(out: Path, source: str, lines: list[str], with_fleet: bool) -> int:
    missing = [k for k, v in SAFETY.items() if os.environ.get(k) != v]
    if missing:
        print("refusing: set " + " ".join(f"{k}={SAFETY[k]}" for k in missing), file=sys.stderr)
        return 2
    log_versions(lines)
    runs: dict = {}
    fleet_runs: dict = {}
    jobs: list[Job] = []
    try:
        first = Job(source, 29533, lines)
        jobs.append(first)
        pid = first.wait_for_loop()
        if pid is None:
            return 1
        time.sleep(2)
        (out / "proc_capture.json").write_text(json.dumps(capture_proc(pid), indent=1))
        runs["running"] = probe({"transcripts": True}, lines, "running (json)")
        runs["running_text"] = probe(
            {"transcripts": True, "ras_format": "text"}, lines, "running (text)"
        )
        probe({}, lines, "running, once more (timing)")
        if with_fleet:
            fleet_runs["running"] = fleet_run(out, "running", lines)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(1)
        log(lines, f"job stopped: State {_state(pid)}")
        runs["stopped"] = probe({"transcripts": True}, lines, "stopped")
        if with_fleet:
            fleet_runs["stopped"] = fleet_run(out, "stopped", lines)
        os.kill(pid, signal.SIGCONT)
        log(lines, f"job continued: State {_state(pid)}")
        # Two jobs on one host, each its own 1-rank communicator: both RAS servers listen on
        # localhost:28028 (SO_REUSEPORT), each connection reaches one of them.
        jobs.append(Job(source, 29534, lines))
        probe_two_jobs(out, jobs[-1], pid, lines)
    finally:
        for job in jobs:
            job.end()
        if fleet_runs:
            (out / "fleet_runs.json").write_text(json.dumps(fleet_runs, indent=1))
    nones = [probe({}, lines, f"no job #{i + 1}") for i in range(3)]
    runs["none"] = nones[0]
    for name, (result, wall) in runs.items():
        result["_wall_s"] = round(wall, 3)
        (out / f"live_{name}.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    totals = [round(r["data"]["scan"]["total_s"], 3) for r, _ in nones]
    walls = [round(w, 3) for _, w in nones]
    log(lines, f"no job: probe total_s {totals}, wall with interpreter start {walls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
