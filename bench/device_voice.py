"""On a lent GPU host (local transport: no sshd there), what fleet says first, for real:

  1. `fleet probe -p health`, `-p gpubench`: each shows its facts on screen, no empty table;
  2. a 1-rank NCCL job running: `fleet probe -p live` and `fleet jobs` show it; then the job
     SIGSTOPped: `fleet probe -p live` leads with a finding naming its process and GPU, and
     `fleet jobs` names it; the job's whole process group is killed on every way out.

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    python3 bench/device_voice.py --out "$OUT"

Writes at most 8 files to --out: each command's output at 80 columns, its exit code and wall time,
and the JSON of the stopped-job run. Health's --sample check is bench/device_health_sample.sh.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_live import JOB, SAFETY, job_python_pid  # bench/ beside this file

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, **SAFETY, "COLUMNS": "80", "PYTHONUNBUFFERED": "1"}


def fleet(out: list[str], label: str, *args: str, timeout: float = 240) -> str:
    """`fleet ARGS` at 80 columns; its output, exit code and wall time appended to `out`."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "fleet", *args],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.monotonic() - started
    out.append(f"===== {label}: fleet {' '.join(args)}: exit {done.returncode}, {wall:.1f} s")
    out.append(done.stdout.rstrip())
    if done.stderr.strip():
        out.append("----- stderr (last lines)")
        out.append("\n".join(done.stderr.rstrip().splitlines()[-15:]))
    return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_job() -> subprocess.Popen[str]:
    env = {**ENV, "JOB_PORT": str(free_port())}
    return subprocess.Popen(
        ["timeout", "300", sys.executable, "-c", JOB],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_for_loop(job: subprocess.Popen[str], out: list[str], limit_s: float = 120) -> int | None:
    started = time.monotonic()
    while time.monotonic() - started < limit_s and job.stdout:
        line = job.stdout.readline()
        if not line:
            break
        if line.startswith("looping"):
            return job_python_pid(job.pid)
        out.append("job: " + line.rstrip()[-300:])
    out.append("the job never reached its loop")
    return None


def end_job(job: subprocess.Popen[str]) -> None:
    """Continue and kill the job's whole group (its session), then reap it."""
    for signum in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(job.pid, signum)
        except ProcessLookupError:
            break
    job.wait(timeout=30)


def live_steps(out_dir: Path, out: list[str]) -> None:
    job = start_job()
    try:
        pid = wait_for_loop(job, out)
        out.append(f"job python pid {pid}")
        if pid is None:
            return
        runs = ["--runs-dir", "/tmp/fleet-runs"]
        fleet(out, "live, job running", "probe", "-p", "live", *runs)
        fleet(out, "jobs, job running", "jobs", *runs)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(1)
        stopped = out_dir / "run_stopped.json"
        fleet(out, "live, job stopped", "probe", "-p", "live", "--json", str(stopped), *runs)
        fleet(out, "jobs, job stopped", "jobs", "--run", str(stopped))
        fleet(out, "check, job stopped", "check", "--run", str(stopped))
    finally:
        end_job(job)
        out.append(f"job ended: exit {job.returncode}")


def this_python_inventory(out_dir: Path) -> str:
    """An inventory of this machine probed with this interpreter (the one with torch): by name,
    `python3` is found outside the environment fleet runs in (fleet/transport/local.py)."""
    path = out_dir / "inventory.yaml"
    path.write_text(f"hosts:\n  local:\n    transport: local\n    python: {sys.executable}\n")
    return str(path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--skip-gpubench", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out: list[str] = []
    try:
        fleet(out, "health", "probe", "-p", "health", "--runs-dir", "/tmp/fleet-runs")
        if not args.skip_gpubench:
            gpubench = str(args.out / "run_gpubench.json")
            runs = ("--runs-dir", "/tmp/fleet-runs", "--json", gpubench)
            inventory = this_python_inventory(Path("/tmp"))
            fleet(out, "gpubench", "probe", "-i", inventory, "-p", "gpubench", *runs)
        live_steps(args.out, out)
    finally:
        (args.out / "voice.txt").write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
