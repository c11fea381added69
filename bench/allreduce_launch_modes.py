"""What sets the 8 B eager allreduce latency of one process launch? (2+ GPUs, NCCL)

One 2-rank launch: 50 warm-up calls, then 7 × 20 timed calls at 8 B; prints per rank the GPU-side
time per call (CUDA events), the host time to enqueue one call (perf_counter), and the CPUs the rank
may run on. POLICY: none (as started), local (the GPU's local_cpulist), cores (two separate
physical cores per rank). Run it several times per policy; with NCCL_DEBUG=INFO to compare the
set-up of a fast and a slow launch (bench/README.md, "Allreduce").
    python3 bench/allreduce_launch_modes.py none|local|cores
"""

import os
import socket
import statistics
import sys
import time


def siblings(cpu):
    with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
        return f.read().strip()


def local_cpus(torch, dev):
    p = torch.cuda.get_device_properties(dev)
    bus = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    with open(f"/sys/bus/pci/devices/{bus}/local_cpulist") as handle:
        txt = handle.read().strip()
    out = []
    for part in txt.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def worker(rank, world, port, policy, q):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    local = local_cpus(torch, rank)
    if policy == "local":
        os.sched_setaffinity(0, local)
    elif policy == "cores":  # two distinct physical cores per rank, no HT siblings shared
        firsts, seen = [], set()
        for c in local:
            s = siblings(c)
            if s not in seen:
                seen.add(s)
                firsts.append(c)
        os.sched_setaffinity(0, firsts[4 * rank : 4 * rank + 2])
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        device_id=torch.device("cuda", rank),
    )
    t = torch.ones(4, dtype=torch.bfloat16, device="cuda")
    for _ in range(50):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    samples, host = [], []
    for _ in range(7):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        h0 = time.perf_counter()
        s.record()
        for _ in range(20):
            dist.all_reduce(t)
        e.record()
        h1 = time.perf_counter()
        torch.cuda.synchronize()
        samples.append(s.elapsed_time(e) / 20 * 1e3)
        host.append((h1 - h0) / 20 * 1e6)
    cpu = os.sched_getaffinity(0)
    q.put((rank, statistics.median(samples), statistics.median(host), sorted(cpu)[:4], len(cpu)))
    dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp

    policy = sys.argv[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ps = [ctx.Process(target=worker, args=(r, 2, port, policy, q)) for r in range(2)]
    [p.start() for p in ps]
    res = sorted(q.get(timeout=120) for _ in ps)
    [p.join(30) for p in ps]
    print(
        policy,
        " | ".join(
            f"r{r}: gpu {g:.1f}us host-launch {h:.1f}us cpus {c}..({n})" for r, g, h, c, n in res
        ),
        flush=True,
    )
