"""The host side of `fleet fabric`: this host's ranks of one cross-host allreduce group.

The controller (fleet/fabric/launch.py) sends this file, prefixed with a start-up alarm line and a
`FABRIC = {...}` literal, to `<python> -S -c LAUNCHER` on the host (fleet/transport/launch.py), as
it sends the probe bundle: nothing touches disk. The launcher's alarm ends this process a few
seconds past the round's deadline whatever happens.

This process forks one child per rank on this host (one per GPU with NCCL, one per host with
gloo). Each child calls `torch.distributed.init_process_group(init_method="tcp://MASTER:PORT")`,
times `all_reduce` at each size, checks the sums, and reports. The parent writes a heartbeat every
second (a closed channel shows up as EPIPE: it then kills its ranks), kills its ranks on SIGTERM,
SIGHUP, SIGINT or its own deadline, and each rank dies with the parent (PR_SET_PDEATHSIG) and has
its own alarm: no rendezvous outlives the round.

Protocol, one JSON object per line on stdout:
    {"type": "hello", "pid", "python"}
    {"type": "port_busy", "port"}                     rank 0's host: the rendezvous port is taken
    {"type": "tick"}                                  every second
    {"type": "joined", "rank", "join_s"}
    {"type": "size", "rank", "bytes", "iters", "seconds", "correct"}
    {"type": "rank_done", "rank", "env"}
    {"type": "rank_error", "rank", "stage", "error"}  stage: import | use its GPU | join | allreduce
    {"type": "rank_exit", "rank", "code"}             a rank that ended without saying why
    {"type": "timeout", "after_s"}
    {"type": "done"}

Stdlib only until a rank imports torch; Python 3.8+.
"""

import ctypes
import datetime
import errno
import fcntl
import json
import os
import signal
import socket
import struct
import sys
import time
import traceback

HEARTBEAT_S = 1.0
SIOCGIFADDR = 0x8915
PR_SET_PDEATHSIG = 1
REPORTED_ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "NVSHMEM_", "CUDA_")
MAX_ERROR_CHARS = 1500
CONFIG = globals().get("FABRIC") or {}


def emit(message):
    """One protocol line in one write (atomic on a pipe below PIPE_BUF), from parent or rank."""
    os.write(1, (json.dumps(message) + "\n").encode())


# ------------------------------------------------------------------------------ the parent


def main(config):
    started = time.monotonic()
    emit({"type": "hello", "pid": os.getpid(), "python": sys.version.split()[0]})
    if config.get("check_port") and port_taken(config["port"]):
        emit({"type": "port_busy", "port": config["port"]})
        return 3
    os.environ.update(config.get("env") or {})
    if config["backend"] == "gloo":
        choose_interface(config.get("route_to"))
    children = {}
    for placement in config["ranks"]:
        pid = os.fork()
        if pid == 0:
            run_rank(config, placement)  # never returns
        children[pid] = placement["rank"]
    return watch(children, started + float(config["deadline_s"]))


def port_taken(port):
    """Whether the rendezvous port is in use here (TCPStore would fail to bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", int(port)))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def choose_interface(peer):
    """Point gloo at the interface that routes to a peer, unless the user chose one. Gloo's
    default is the address the hostname resolves to, which is often lo or another network."""
    if not peer or os.environ.get("GLOO_SOCKET_IFNAME"):
        return
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.connect((peer, 9))
            local = udp.getsockname()[0]
    except OSError:
        return
    name = interface_with(local)
    if name:
        os.environ["GLOO_SOCKET_IFNAME"] = name


def interface_with(address):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        for _index, name in socket.if_nameindex():
            try:
                packed = struct.pack("256s", name[:15].encode())
                raw = fcntl.ioctl(udp.fileno(), SIOCGIFADDR, packed)
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == address:
                return name
    return None


def watch(children, deadline):
    """Heartbeat until every rank has exited; kill them all at the deadline or on a signal."""
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda *_: finish(children, 143))
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    while children:
        if time.monotonic() >= deadline:
            kill_all(children)
            emit({"type": "timeout", "after_s": round(float(CONFIG.get("deadline_s", 0)), 1)})
            return 4
        beat(children)
        reap(children, block_s=HEARTBEAT_S)
    emit({"type": "done"})
    return 0


def beat(children):
    try:
        emit({"type": "tick"})
    except OSError:  # EPIPE: nobody listens any more
        finish(children, 141)


def reap(children, block_s):
    until = time.monotonic() + block_s
    while children and time.monotonic() < until:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.05)
            continue
        rank = children.pop(pid, None)
        code = (
            os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
        )
        if rank is not None and code != 0:
            emit({"type": "rank_exit", "rank": rank, "code": code})


def kill_all(children):
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        children.pop(pid, None)


def finish(children, code):
    kill_all(children)
    os._exit(code)


# ------------------------------------------------------------------------------- a rank


def run_rank(config, placement):
    """One rank, in a forked child: always ends with os._exit (no atexit, no NCCL teardown hang)."""
    code = 1
    try:
        die_with_parent()
        signal.alarm(max(1, int(config["deadline_s"])))
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = measure_rank(config, placement)
    except BaseException:  # anything else: say it, then go
        report_error(placement["rank"], "allreduce", traceback.format_exc())
    finally:
        os._exit(code)


def die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the alarm still ends it


def report_error(rank, stage, text):
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    emit({"type": "rank_error", "rank": rank, "stage": stage, "error": tail(lines)})


def tail(lines):
    """The last lines of a traceback: the exception itself is at the end."""
    text = "\n".join(lines[-6:])
    return text[-MAX_ERROR_CHARS:]


def measure_rank(config, placement):
    rank = placement["rank"]
    try:
        import torch
        import torch.distributed as dist
    except BaseException:
        report_error(rank, "import", traceback.format_exc())
        return 1
    try:
        device = pick_device(torch, config["backend"], placement.get("device"))
    except BaseException:
        report_error(rank, "use its GPU", traceback.format_exc())
        return 1
    started = time.monotonic()
    try:
        join(dist, config, rank)
        all_reduce(torch, dist, torch.zeros(2, device=device))
    except BaseException:
        report_error(rank, "join", traceback.format_exc())
        return 1
    emit({"type": "joined", "rank": rank, "join_s": round(time.monotonic() - started, 3)})
    for size in config["sizes"]:
        emit(dict(time_size(torch, dist, config, device, int(size)), type="size", rank=rank))
    dist.destroy_process_group()
    emit({"type": "rank_done", "rank": rank, "env": reported_env(os.environ)})
    return 0


def pick_device(torch, backend, index):
    if backend != "nccl":
        return torch.device("cpu")
    torch.cuda.set_device(int(index or 0))
    return torch.device("cuda", int(index or 0))


def join(dist, config, rank):
    dist.init_process_group(
        config["backend"],
        init_method="tcp://{}:{}".format(bracketed(config["master"]), config["port"]),
        rank=rank,
        world_size=int(config["world_size"]),
        timeout=datetime.timedelta(seconds=float(config["join_timeout_s"])),
    )


def bracketed(address):
    return "[{}]".format(address) if ":" in address else address


def all_reduce(torch, dist, tensor):
    dist.all_reduce(tensor)
    if tensor.is_cuda:
        torch.cuda.synchronize()


def time_size(torch, dist, config, device, size):
    """Warm-up, `iters` timed all_reduce calls (eager), then one checked call."""
    numel = max(1, size // 4)
    iters = int(config["iters"].get(str(size), 5))
    timed = torch.zeros(numel, dtype=torch.float32, device=device)
    for _ in range(int(config.get("warmup", 2))):
        all_reduce(torch, dist, timed)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(timed)
    if timed.is_cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iters
    world = int(config["world_size"])
    checked = torch.full((numel,), float(dist.get_rank() + 1), dtype=torch.float32, device=device)
    all_reduce(torch, dist, checked)
    correct = bool((checked == float(world * (world + 1) // 2)).all().item())
    return {"bytes": numel * 4, "iters": iters, "seconds": seconds, "correct": correct}


def reported_env(environ):
    """The NCCL_*/GLOO_*/… variables the rank ran with (an allow-list: no secrets)."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith(REPORTED_ENV_PREFIXES)}


if __name__ == "__main__":
    sys.exit(main(CONFIG))
