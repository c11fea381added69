"""fleet side by side with the floor, pssh and Ansible, on one loopback fleet of real sshd.

    python3 bench/side_by_side.py --hosts 200 --sshd 20            # 3 runs of each tool
    python3 bench/side_by_side.py --hosts 1000 --sshd 20 --runs 1  # a big fleet, one run each

K real sshd (127.77.0.x, fresh keys, MaxStartups/MaxSessions raised) serve N inventory hosts:
several names per sshd, same address:port, host-key checking on everywhere. Every tool sends the
same bytes, fleet's own bundle (probes system,packages), to `<python> -` (Ansible: as the script):

  fleet    `python -m fleet probe -p system,packages --no-save --json FILE -c 100`
  floor    a bare asyncssh loop: keys and known_hosts loaded once, semaphore 100, no retries
  pssh     Debian's `parallel-ssh -p 100 -I` (one OpenSSH `ssh` per host), StrictHostKeyChecking
  ansible  `ansible all -m script -a 'BUNDLE executable=PYTHON' -f 100`, host_key_checking on

A run counts only when the tool returned N valid results (each host's output parses into hello,
every probe `ok`, done). Per tool: wall time (median of the runs, min–max), controller CPU per
host (user+sys of the tool and every process under it, from wait4; this process is a child
subreaper, so daemonized ssh ControlPersist masters are reaped and counted too), peak RSS of the
largest controller process, and the ratios fleet/floor, fleet/pssh, fleet/ansible. The fleet is
torn down on every exit path. Needs root (sshd), openssh-server; pssh and ansible-core are
optional (`--tools` picks; a missing one is reported with how to install it).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import ctypes
import getpass
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fleet.execution.bundle import build_bundle  # noqa: E402
from fleet.execution.fanout import REMOTE_PARALLEL  # noqa: E402
from fleet.execution.protocol import StreamDecoder  # noqa: E402
from tests.integration.sshd import SshdFarm, find_sshd  # noqa: E402

PROBES = ("system", "packages")
TOOLS = ("fleet", "floor", "pssh", "ansible")
# The interpreter this runs under: a virtual environment's own (its packages), else the real one
# behind a pyenv shim.
PYTHON = sys.executable if sys.prefix != sys.base_prefix else os.path.realpath(sys.executable)
PR_SET_CHILD_SUBREAPER = 36
INSTALL = {
    "pssh": "apt-get install -y pssh          # gives /usr/bin/parallel-ssh",
    "ansible": f"{PYTHON} -m pip install ansible-core",
}


# ------------------------------------------------------------------------------ the fleet


@dataclass(frozen=True)
class Target:
    name: str
    address: str
    port: int
    group: str  # the sshd serving it


@dataclass
class Fleet:
    farm: SshdFarm
    targets: list[Target]
    known_hosts: Path
    workdir: Path

    @property
    def key(self) -> Path:
        return self.farm.client_key

    def sshd_pids(self) -> set[int]:
        return {h.process.pid for h in self.farm.hosts.values() if h.process}


def start_fleet(workdir: Path, hosts: int, sshds: int) -> Fleet:
    sshd = find_sshd()
    if sshd is None:
        raise SystemExit("needs sshd: apt-get install -y openssh-server (and root)")
    farm = SshdFarm(workdir / "farm", sshd)
    try:
        for index in range(sshds):
            farm.start(
                f"s{index:02d}",
                f"127.77.{index // 250}.{index % 250 + 1}",
                MaxStartups="1000:30:2000",
                MaxSessions="1000",
                LogLevel="INFO",
            )
    except BaseException:
        farm.stop()
        raise
    servers = list(farm.hosts.values())
    targets = []
    for index in range(hosts):
        server = servers[index % sshds]
        targets.append(
            Target(f"h{index:04d}-{server.name}", server.address, server.port, server.name)
        )
    known = farm.known_hosts(workdir / "known_hosts")
    return Fleet(farm, targets, known, workdir)


# ------------------------------------------------------------------- running and measuring


@dataclass
class Measure:
    wall_s: float
    cpu_s: float
    maxrss_kib: int
    returncode: int
    valid: int
    note: str = ""


@dataclass
class Usage:
    cpu_s: float = 0.0
    maxrss_kib: int = 0

    def add(self, rusage: resource.struct_rusage | None) -> None:
        if rusage is not None:
            self.cpu_s += rusage.ru_utime + rusage.ru_stime
            self.maxrss_kib = max(self.maxrss_kib, rusage.ru_maxrss)


def become_subreaper() -> None:
    """Orphans under us (ssh ControlPersist masters) become our children: we reap and count them."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("warning: cannot become a child subreaper: daemonized helpers go uncounted")


def run_measured(
    command: Sequence[str],
    fleet: Fleet,
    timeout_s: float,
    stdin: Path | None = None,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> tuple[float, Usage, int]:
    """Run `command`; return wall time, the CPU and peak RSS of its whole process tree, its code."""
    usage, farm_pids = Usage(), fleet.sshd_pids()
    out = (log or Path(os.devnull)).open("wb")
    with out, stdin.open("rb") if stdin else open(os.devnull, "rb") as source:
        started = time.perf_counter()
        process = subprocess.Popen(
            list(command),
            stdin=source,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        try:
            code = reap_until(process.pid, usage, farm_pids, started + timeout_s)
        except BaseException:  # Ctrl-C, a dead sshd: the tool goes too
            kill_group(process.pid)
            raise
        wall = time.perf_counter() - started
    process.returncode = code  # reaped by us (wait4), not by Popen
    end_orphans(usage, farm_pids)
    return wall, usage, code


def reap_until(pid: int, usage: Usage, farm_pids: set[int], deadline: float) -> int:
    """wait4 every child that ends until `pid` does; past the deadline kill its process group."""
    while True:
        try:
            child, status, rusage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            raise RuntimeError("lost track of the tool's process") from None
        if child == 0:
            if time.perf_counter() > deadline:
                kill_group(pid)
                deadline = float("inf")
                print(f"    timed out: killed process group {pid}")
            time.sleep(0.02)
            continue
        if child in farm_pids:
            raise RuntimeError(f"an sshd of the farm (pid {child}) died during the run")
        usage.add(rusage)
        if child == pid:
            return os.waitstatus_to_exitcode(status)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def my_children() -> list[int]:
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            found.append(int(entry.name))
    return found


def end_orphans(usage: Usage, farm_pids: set[int]) -> None:
    """Daemonized leftovers of the tool (ssh ControlPersist masters) were re-parented to us:
    end each by its pid and add what it used."""
    leftovers = [p for p in my_children() if p not in farm_pids]
    for pid in leftovers:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for pid in leftovers:
        deadline = time.monotonic() + 5
        while True:
            try:
                child, _status, rusage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if child:
                usage.add(rusage)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.01)


# ------------------------------------------------------------------------- valid results


def valid_output(stdout: bytes | str) -> bool:
    """A host's whole stdout: the runner said hello, every probe ok, and done."""
    decoder = StreamDecoder()
    decoder.feed(stdout.encode() if isinstance(stdout, str) else stdout)
    decoder.feed(b"\n")
    return (
        decoder.hello is not None
        and decoder.done
        and all(decoder.probes.get(p) is not None and decoder.probes[p].ok for p in PROBES)
    )


# ------------------------------------------------------------------------------ the tools


@dataclass
class Tool:
    name: str
    prepare: Callable[[Fleet, Path, argparse.Namespace], list[str]]
    count: Callable[[Fleet, Path], tuple[int, str]]
    env: Callable[[Fleet, Path], dict[str, str]] = lambda fleet, rundir: dict(os.environ)
    stdin: bool = False
    missing: Callable[[], str | None] = lambda: None
    notes: list[str] = field(default_factory=list)


def fleet_command(fleet: Fleet, rundir: Path, args: argparse.Namespace) -> list[str]:
    inventory = {
        "defaults": {
            "user": getpass.getuser(),
            "identity_file": str(fleet.key),
            "known_hosts": str(fleet.known_hosts),
            "python": PYTHON,
            "connect_timeout": 60,
        },
        "hosts": {t.name: {"address": t.address, "port": t.port} for t in fleet.targets},
    }
    path = rundir / "inventory.yaml"  # block YAML: fleet tells its format by the top-level keys
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return [
        PYTHON, "-m", "fleet", "probe", "-i", str(path), "-p", ",".join(PROBES), "--no-save",
        "--json", str(rundir / "run.json"), "-t", str(args.host_timeout),
        *(["-c", str(args.concurrency)] if args.concurrency else []),  # 0: fleet's own defaults
    ]  # fmt: skip


def fleet_count(fleet: Fleet, rundir: Path) -> tuple[int, str]:
    try:
        hosts = json.loads((rundir / "run.json").read_text())["hosts"]
    except (OSError, ValueError, KeyError) as exc:
        return 0, f"no run document: {exc}"
    good = sum(
        1
        for t in fleet.targets
        if hosts.get(t.name, {}).get("status") == "ok"
        and all(hosts[t.name]["probes"].get(p, {}).get("ok") for p in PROBES)
    )
    statuses: dict[str, int] = {}
    for outcome in hosts.values():
        statuses[outcome["status"]] = statuses.get(outcome["status"], 0) + 1
    return good, "" if good == len(fleet.targets) else f"statuses {statuses}"


def fleet_env(fleet: Fleet, rundir: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(rundir / "state"), "PYTHONPATH": str(ROOT)}


def floor_command(fleet: Fleet, rundir: Path, args: argparse.Namespace) -> list[str]:
    spec = {
        "targets": [[t.name, t.address, t.port] for t in fleet.targets],
        "user": getpass.getuser(),
        "key": str(fleet.key),
        "known_hosts": str(fleet.known_hosts),
        "command": f"{PYTHON} -",
        "bundle": str(fleet.workdir / "bundle.py"),
        "concurrency": args.concurrency or len(fleet.targets),  # 0: every host at once
        "out": str(rundir / "floor.jsonl"),
    }
    path = rundir / "floor.json"
    path.write_text(json.dumps(spec))
    return [PYTHON, __file__, "--floor-worker", str(path)]


def floor_count(fleet: Fleet, rundir: Path) -> tuple[int, str]:
    try:
        lines = (rundir / "floor.jsonl").read_text().splitlines()
    except OSError as exc:
        return 0, str(exc)
    outputs = {}
    for line in lines:
        record = json.loads(line)
        outputs[record["host"]] = record
    good = sum(
        1
        for t in fleet.targets
        if outputs.get(t.name, {}).get("exit") == 0 and valid_output(outputs[t.name]["stdout"])
    )
    errors = [r["error"] for r in outputs.values() if r.get("error")]
    return good, f"{len(errors)} errors, e.g. {errors[0]}" if errors else ""


def pssh_binary() -> str | None:
    return shutil.which("parallel-ssh") or shutil.which("pssh")


def pssh_command(fleet: Fleet, rundir: Path, args: argparse.Namespace) -> list[str]:
    config = rundir / "ssh_config"  # one block per sshd; host names differ, address:port shared
    config.write_text(
        "".join(
            f"Host *-{name}\n  HostName {h.address}\n  Port {h.port}\n"
            for name, h in fleet.farm.hosts.items()
        )
    )
    hosts = rundir / "hosts"
    hosts.write_text("".join(t.name + "\n" for t in fleet.targets))
    binary = pssh_binary()
    assert binary
    options = [
        f"IdentityFile={fleet.key}", "IdentitiesOnly=yes", f"UserKnownHostsFile={fleet.known_hosts}",
        "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=yes", "BatchMode=yes",
        "ConnectTimeout=60",
    ]  # fmt: skip
    return [
        binary, "-h", str(hosts), "-l", getpass.getuser(),
        "-p", str(args.concurrency or len(fleet.targets)),
        "-t", str(args.host_timeout), "-o", str(rundir / "out"), "-e", str(rundir / "err"),
        "-I", "-x", f"-F {config}", *[x for o in options for x in ("-O", o)], f"{PYTHON} -",
    ]  # fmt: skip


def pssh_count(fleet: Fleet, rundir: Path) -> tuple[int, str]:
    good = 0
    for target in fleet.targets:
        with contextlib.suppress(OSError):
            good += valid_output((rundir / "out" / target.name).read_bytes())
    return good, ""


def ansible_binary() -> str | None:
    beside = Path(PYTHON).parent / "ansible"  # the entry script itself, not a pyenv shim
    return str(beside) if beside.exists() else shutil.which("ansible")


def ansible_command(fleet: Fleet, rundir: Path, args: argparse.Namespace) -> list[str]:
    control = Path(tempfile.mkdtemp(prefix="cp", dir="/tmp"))  # sockets need short paths
    (rundir / "control_dir").write_text(str(control))
    inventory = {
        "all": {
            "hosts": {
                t.name: {
                    "ansible_host": t.address,
                    "ansible_port": t.port,
                    # one ControlPersist master per inventory host, as on a real fleet (the
                    # default path would share one master between names of one address:port)
                    "ansible_control_path": f"{control}/{i}",
                }
                for i, t in enumerate(fleet.targets)
            },
            "vars": {
                "ansible_user": getpass.getuser(),
                "ansible_ssh_private_key_file": str(fleet.key),
                "ansible_python_interpreter": PYTHON,
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={fleet.known_hosts} "
                "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes",
            },
        }
    }
    path = rundir / "inventory.json"
    path.write_text(json.dumps(inventory))
    binary = ansible_binary()
    assert binary
    return [
        binary, "all", "-i", str(path), "-m", "script",
        "-a", f"{fleet.workdir / 'bundle.py'} executable={PYTHON}",
        "-f", str(args.concurrency or len(fleet.targets)),
    ]  # fmt: skip


def ansible_env(fleet: Fleet, rundir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_HOME": str(rundir / "ansible_home"),
        "ANSIBLE_LOCAL_TEMP": str(rundir / "ansible_tmp"),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "oneline",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_TIMEOUT": "60",
        "ANSIBLE_CONFIG": str(rundir / "no-ansible.cfg"),  # not the user's own config
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
    }


def ansible_count(fleet: Fleet, rundir: Path) -> tuple[int, str]:
    """oneline: `NAME | CHANGED => {"stdout": ...}` per host, one line each."""
    results = {}
    for line in (rundir / "output.log").read_text(errors="replace").splitlines():
        name, sep, rest = line.partition(" | ")
        if not sep or " => " not in rest:
            continue
        try:
            results[name] = json.loads(rest.split(" => ", 1)[1])
        except ValueError:
            continue
    good = sum(
        1
        for t in fleet.targets
        if results.get(t.name, {}).get("rc") == 0 and valid_output(results[t.name]["stdout"])
    )
    shutil.rmtree((rundir / "control_dir").read_text(), ignore_errors=True)
    return good, ""


ALL_TOOLS = {
    "fleet": Tool("fleet", fleet_command, fleet_count, env=fleet_env),
    "floor": Tool("floor", floor_command, floor_count),
    "pssh": Tool(
        "pssh",
        pssh_command,
        pssh_count,
        stdin=True,
        missing=lambda: None if pssh_binary() else INSTALL["pssh"],
    ),
    "ansible": Tool(
        "ansible",
        ansible_command,
        ansible_count,
        env=ansible_env,
        missing=lambda: None if ansible_binary() else INSTALL["ansible"],
    ),
}


def measure(tool: Tool, fleet: Fleet, args: argparse.Namespace, run: int) -> Measure:
    rundir = fleet.workdir / f"{tool.name}-{run}"
    rundir.mkdir()
    command = tool.prepare(fleet, rundir, args)
    log = rundir / "output.log"
    wall, usage, code = run_measured(
        command,
        fleet,
        args.timeout,
        stdin=fleet.workdir / "bundle.py" if tool.stdin else None,
        env=tool.env(fleet, rundir),
        log=log,
    )
    valid, note = tool.count(fleet, rundir)
    if valid != len(fleet.targets) and not note:
        note = log.read_text(errors="replace")[-300:].replace("\n", " | ")
    return Measure(wall, usage.cpu_s, usage.maxrss_kib, code, valid, note)


# --------------------------------------------------------------------------- the floor


def floor_worker(spec_path: str) -> int:
    """The floor: what any asyncssh fan-out must spend. Runs as its own process (measured)."""
    import asyncio

    import asyncssh

    spec = json.loads(Path(spec_path).read_text())
    bundle = Path(spec["bundle"]).read_bytes()
    keys = asyncssh.load_keypairs(spec["key"])
    known = asyncssh.import_known_hosts(Path(spec["known_hosts"]).read_text())

    async def one(
        limit: asyncio.Semaphore, name: str, address: str, port: int
    ) -> dict[str, object]:
        async with limit:
            try:
                async with asyncssh.connect(
                    address, port=port, username=spec["user"], client_keys=keys,
                    known_hosts=known, config=None, connect_timeout=60,
                ) as conn:  # fmt: skip
                    done = await conn.run(spec["command"], input=bundle, encoding=None)
                    stdout = done.stdout if isinstance(done.stdout, bytes) else b""
                    return {"host": name, "exit": done.exit_status, "stdout": stdout.decode()}
            except (OSError, asyncssh.Error) as exc:
                return {"host": name, "exit": None, "stdout": "", "error": repr(exc)}

    async def main() -> list[dict[str, object]]:
        limit = asyncio.Semaphore(spec["concurrency"])
        return await asyncio.gather(*(one(limit, *t) for t in spec["targets"]))

    results = asyncio.run(main())
    with open(spec["out"], "w") as out:
        for record in results:
            out.write(json.dumps(record) + "\n")
    return 0


# ------------------------------------------------------------------------------ reporting


def row(name: str, runs: list[Measure], hosts: int) -> dict[str, float] | None:
    counted = [m for m in runs if m.valid == hosts]
    if not counted:
        return None
    walls = [m.wall_s for m in counted]
    return {
        "wall": statistics.median(walls),
        "wall_min": min(walls),
        "wall_max": max(walls),
        "cpu_ms": statistics.median(m.cpu_s for m in counted) / hosts * 1000,
        "rss_mb": max(m.maxrss_kib for m in counted) / 1024,
        "counted": len(counted),
    }


def report(results: dict[str, list[Measure]], hosts: int, sshds: int) -> None:
    load = os.getloadavg()
    print(f"\nN = {hosts} hosts on {sshds} sshd, {os.cpu_count()} cores, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    print("| tool | valid runs | wall s, median (min–max) | controller CPU ms/host | peak RSS MB |")
    print("| --- | --- | --- | --- | --- |")
    rows = {}
    for name, runs in results.items():
        summary = row(name, runs, hosts)
        rows[name] = summary
        if summary is None:
            print(f"| {name} | 0/{len(runs)} | — | — | — |")
            continue
        print(
            f"| {name} | {summary['counted']:.0f}/{len(runs)} | {summary['wall']:.2f} "
            f"({summary['wall_min']:.2f}–{summary['wall_max']:.2f}) | {summary['cpu_ms']:.1f} "
            f"| {summary['rss_mb']:.0f} |"
        )
    fleet = rows.get("fleet")
    for other in ("floor", "pssh", "ansible"):
        base = rows.get(other)
        if fleet and base:
            print(
                f"fleet/{other}: wall {fleet['wall'] / base['wall']:.2f}×, "
                f"CPU/host {fleet['cpu_ms'] / base['cpu_ms']:.2f}×"
            )


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=200, help="inventory hosts N (default 200)")
    parser.add_argument("--sshd", type=int, default=20, help="real sshd K serving them (20)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each tool (3)")
    parser.add_argument(
        "--concurrency", type=int, default=100,
        help="hosts at once (100); 0: fleet's defaults, every host at once for the others",
    )  # fmt: skip
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset")
    parser.add_argument("--timeout", type=float, default=0, help="s per tool run (auto)")
    parser.add_argument("--host-timeout", type=int, default=600, help="fleet/pssh per-host s")
    parser.add_argument("--json", dest="json_out", help="also write the raw measures here")
    args = parser.parse_args(argv)
    args.timeout = args.timeout or 120 + args.hosts * 1.0
    return args


def check_tools(names: list[str]) -> list[str]:
    usable = []
    for name in names:
        if name not in ALL_TOOLS:
            raise SystemExit(f"unknown tool {name!r}; known: {', '.join(ALL_TOOLS)}")
        hint = ALL_TOOLS[name].missing()
        if hint:
            print(f"skipping {name}: not installed. Install it with:\n    {hint}")
            continue
        usable.append(name)
    return usable


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--floor-worker"]:
        return floor_worker(argv[1])
    args = parse_args(argv)
    tools = check_tools([t.strip() for t in args.tools.split(",") if t.strip()])
    if os.geteuid() != 0:
        print("note: sshd on loopback normally needs root (as in CI)")
    become_subreaper()
    # fleet as an install has it: its modules compiled once (pip does so at install time; an
    # editable checkout under PYTHONDONTWRITEBYTECODE would compile every module on every run)
    compileall.compile_dir(str(ROOT / "fleet"), quiet=1)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` tears the fleet down
    results: dict[str, list[Measure]] = {t: [] for t in tools}
    with tempfile.TemporaryDirectory(prefix="side_by_side_") as tmp:
        workdir = Path(tmp)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"starting {args.sshd} sshd for {args.hosts} hosts (load average {load}) …", flush=True
        )
        fleet = start_fleet(workdir, args.hosts, args.sshd)
        try:
            script = build_bundle(list(PROBES)).script({}, args.host_timeout - 5.0, REMOTE_PARALLEL)
            (workdir / "bundle.py").write_bytes(script)
            for run in range(args.runs):
                for name in tools:  # interleaved: drifting load hits every tool alike
                    m = measure(ALL_TOOLS[name], fleet, args, run)
                    results[name].append(m)
                    print(
                        f"  run {run + 1} {name:8} wall {m.wall_s:7.2f} s  CPU {m.cpu_s:7.2f} s "
                        f"({m.cpu_s / args.hosts * 1000:6.1f} ms/host)  RSS "
                        f"{m.maxrss_kib / 1024:6.0f} MB  valid {m.valid}/{args.hosts}  "
                        f"exit {m.returncode} {m.note}",
                        flush=True,
                    )
        finally:
            fleet.farm.stop()
    report(results, args.hosts, args.sshd)
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({k: [vars(m) for m in v] for k, v in results.items()}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
