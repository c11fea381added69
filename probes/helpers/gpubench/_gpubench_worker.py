"""One process of the `gpubench` probe: a GPU's own figures (role "gpu": matmul TFLOPS, memory
copy, pinned host copies) or the peer copies between GPUs (role "pairs", one process for all).

Not a probe (the leading underscore): probes/gpubench.py declares it in `SHIPS`, the bundle carries
its text beside the probe's, and the probe starts one `python -c <program> '<config json>'` per
GPU plus one for the pairs (_worker_io.worker_program: this text run as __main__, with _worker_io
importable, the one helper it imports). Nothing is written on the host. The probe paces the phases: before
each one the worker prints `MARKER {"ready": PHASE}` and reads one line on stdin: `{"budget_s": S}`
runs the phase in about S seconds, anything else (or the end of stdin) ends the process, and its
GPU memory goes with it. Results are `MARKER {json}` lines on stdout. The planning and arithmetic
at the top are pure and tested on their own (tests/probes/test_gpubench.py). Stdlib and torch
only, Python 3.8+.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from _worker_io import ask, describe, emit, guard

Record = Dict[str, Any]
FP8 = "float8_e4m3fn"
FP8_SINCE = (8, 9)  # compute capability with FP8 tensor cores (Ada, Hopper and later)
MiB = 1 << 20


# ---------------------------------------------------------------------------------- planning
def iterations_for(estimate_s: float, budget_s: float, min_iters: int, max_iters: int) -> int:
    """As many timed calls as fit the budget, at least min_iters, at most max_iters."""
    if estimate_s <= 0:
        return max_iters
    return int(max(min_iters, min(max_iters, budget_s / estimate_s)))


def spread(samples: Sequence[float]) -> Dict[str, float]:
    """Median, min and max of the repetitions' seconds per call (the median is the figure)."""
    ordered = sorted(samples)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return {"seconds": median, "seconds_min": ordered[0], "seconds_max": ordered[-1]}


def matmul_flops(shape: Sequence[int]) -> int:
    """An (m×k)·(k×n) product: m·n·k multiply-adds, two floating-point operations each."""
    m, n, k = shape
    return 2 * int(m) * int(n) * int(k)


def shape_label(shape: Sequence[int]) -> str:
    return "x".join(str(int(d)) for d in shape)


def rate(work: float, seconds: float, scale: float = 1e9) -> Optional[float]:
    """work/seconds in units of `scale` (1e9: GB/s; 1e12: TFLOPS), 4 significant digits."""
    if seconds <= 0:
        return None
    return float("%.4g" % (work / seconds / scale))


def gate_seconds(launches: int) -> float:
    """How long the start gate holds the copies back: long enough to enqueue every launch (about
    30 µs each from Python), so that concurrent copies really start together."""
    return min(0.25, 0.005 + 30e-6 * launches)


def fp8_problem(torch: Any, capability: Tuple[int, int]) -> Optional[str]:
    """Why FP8 matmul cannot run here, or None."""
    if tuple(capability) < FP8_SINCE:
        return "compute capability %d.%d has no FP8 tensor cores (8.9 and later)" % capability
    if not hasattr(torch, FP8) or not hasattr(torch, "_scaled_mm"):
        return "torch %s has no %s or _scaled_mm" % (torch.__version__, FP8)
    return None


# ---------------------------------------------------------------------------------- plumbing
def next_order(cfg: Record, phase: str) -> Optional[float]:
    """Say we are ready for `phase`; the probe's answer: its budget in seconds, or None (stop)."""
    order = ask(cfg, {"ready": phase})
    if order is None or not isinstance(order.get("budget_s"), (int, float)):
        return None
    return float(order["budget_s"])


class Timer:
    """CUDA-event timing on the current stream of one device."""

    def __init__(self, torch: Any, cfg: Record) -> None:
        self.torch = torch
        self.repetitions = max(1, int(cfg.get("repetitions", 5)))
        self.max_iters = int(cfg.get("max_iters", 200))

    def timed(self, fn: Callable[[], Any], count: int) -> float:
        torch = self.torch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(count):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

    def measure(self, fn: Callable[[], Any], budget_s: float, warmup: int = 2) -> Record:
        """Seconds per call: `repetitions` timed samples of back-to-back calls, sized to the
        budget from one call's time after `warmup` calls."""
        self.timed(fn, warmup)
        estimate = self.timed(fn, 1)
        iters = iterations_for(estimate, budget_s / self.repetitions, 1, self.max_iters)
        samples = [self.timed(fn, iters) / iters for _ in range(self.repetitions)]
        record = spread(samples)
        record.update(iterations=iters, repetitions=self.repetitions)
        return record


# ---------------------------------------------------------------------------------- role "gpu"
class GpuBench:
    """One GPU's figures, each phase in about its budget."""

    def __init__(self, cfg: Record, torch: Any) -> None:
        self.cfg, self.torch = cfg, torch
        self.index = int(cfg["device"])
        self.device = torch.device("cuda", self.index)
        torch.cuda.set_device(self.device)
        self.timer = Timer(torch, cfg)
        self.warmed = False

    def identity(self) -> Record:
        """What torch knows of the GPU: the probe matches it to nvidia-smi's rows."""
        props = self.torch.cuda.get_device_properties(self.index)
        return device_identity(props, self.index)

    def free(self) -> None:
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()

    # ------------------------------------------------------------------ matmul
    def matmul(self, dtype: str, budget_s: float) -> Record:
        torch = self.torch
        if dtype == FP8:
            capability = torch.cuda.get_device_capability(self.index)
            why = fp8_problem(torch, capability)
            if why:
                return {"unsupported": why}
        shapes = [list(s) for s in self.cfg["shapes"]]
        if not self.warmed:
            self._warm_up(float(self.cfg.get("warmup_s", 0.3)))
        results: Dict[str, Record] = {}
        for shape in shapes:
            label = shape_label(shape)
            try:
                timing = self._time_matmul(dtype, shape, budget_s / len(shapes))
            except Exception as exc:  # a shape or dtype this GPU or torch refuses
                self.free()
                if dtype == FP8 and not results:
                    return {"unsupported": describe(exc)}
                results[label] = {"error": describe(exc)}
                continue
            flops = matmul_flops(shape)
            results[label] = {
                "tflops": rate(flops, timing["seconds"], 1e12),
                "tflops_max": rate(flops, timing["seconds_min"], 1e12),
                "tflops_min": rate(flops, timing["seconds_max"], 1e12),
                "iterations": timing["iterations"] * timing["repetitions"],
            }
        return best_shape(results)

    def _time_matmul(self, dtype: str, shape: Sequence[int], budget_s: float) -> Record:
        """Seconds per matmul of one shape; its buffers are freed on return."""
        timing = self.timer.measure(self._matmul_call(dtype, shape), budget_s)
        self.free()
        return timing

    def _matmul_call(self, dtype: str, shape: Sequence[int]) -> Callable[[], Any]:
        torch = self.torch
        m, n, k = (int(d) for d in shape)
        if dtype == FP8:
            a = torch.randn(m, k, device=self.device, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device=self.device, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
            bt = b.t()  # column-major, as _scaled_mm wants its second operand
            one = torch.ones((), device=self.device, dtype=torch.float32)

            def fp8_call() -> Any:
                return torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

            fp8_call()  # refused here (shape, build) rather than in the timing
            return fp8_call
        kind = getattr(torch, dtype)
        a = torch.randn(m, k, device=self.device, dtype=kind)
        b = torch.randn(k, n, device=self.device, dtype=kind)
        out = torch.empty(m, n, device=self.device, dtype=kind)

        def call() -> Any:
            return torch.matmul(a, b, out=out)

        return call

    def _warm_up(self, seconds: float) -> None:
        """Matmuls for `seconds`: the first ones pay for clocks ramping up and cuBLAS's set-up."""
        fn = self._matmul_call("bfloat16", (4096, 4096, 4096))
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            self.timer.timed(fn, 5)
        self.warmed = True

    # ------------------------------------------------------------------ copies
    def memcpy(self, budget_s: float) -> Record:
        """Device-to-device copy within the GPU: bytes read plus bytes written per second."""
        size = int(self.cfg["copy_bytes"])
        timing = self._time_copy("device", size, budget_s)
        self.free()
        return copy_result(2 * size, timing)

    def host_copy(self, direction: str, budget_s: float) -> Record:
        """Pinned host memory to the GPU (h2d) or back (d2h), one direction at a time."""
        size = int(self.cfg["host_copy_bytes"])
        timing = self._time_copy(direction, size, budget_s)
        self.free()
        return copy_result(size, timing)

    def _time_copy(self, kind: str, size: int, budget_s: float) -> Record:
        """Seconds per copy of `size` bytes; the buffers are dropped on return."""
        torch = self.torch
        dev = torch.empty(size, dtype=torch.uint8, device=self.device)
        if kind == "device":
            other = torch.empty(size, dtype=torch.uint8, device=self.device)
        else:
            other = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        if kind == "d2h":
            return self.timer.measure(lambda: other.copy_(dev, non_blocking=True), budget_s)
        return self.timer.measure(lambda: dev.copy_(other, non_blocking=True), budget_s)

    def run_phase(self, phase: str, budget_s: float) -> Record:
        if phase.startswith("matmul:"):
            return self.matmul(phase.split(":", 1)[1], budget_s)
        if phase == "memcpy":
            return self.memcpy(budget_s)
        if phase in ("h2d", "d2h"):
            return self.host_copy(phase, budget_s)
        raise ValueError("unknown phase %r" % phase)


def best_shape(results: Dict[str, Record]) -> Record:
    """The matmul figure of a dtype: its best shape's median TFLOPS (as mamf-finder searches)."""
    measured = {label: r for label, r in results.items() if r.get("tflops")}
    if not measured:
        errors = [r["error"] for r in results.values() if r.get("error")]
        return {"shapes": results, "error": errors[0] if errors else "no shape measured"}
    label = max(measured, key=lambda key: measured[key]["tflops"])
    return {"tflops": measured[label]["tflops"], "best_shape": label, "shapes": results}


def copy_result(nbytes: int, timing: Record) -> Record:
    return {
        "gbps": rate(nbytes, timing["seconds"]),
        "gbps_max": rate(nbytes, timing["seconds_min"]),
        "gbps_min": rate(nbytes, timing["seconds_max"]),
        "bytes": nbytes,
        "iterations": timing["iterations"] * timing["repetitions"],
    }


def device_identity(props: Any, index: int) -> Record:
    """Name, capability, memory, UUID and PCI address from torch's device properties (the last
    two only where this torch reports them)."""
    uuid = getattr(props, "uuid", None)
    bus = getattr(props, "pci_bus_id", None)
    identity: Record = {
        "cuda_index": index,
        "name": str(props.name),
        "capability": "%d.%d" % (props.major, props.minor),
        "memory_gib": round(float(props.total_memory) / (1 << 30), 1),
        "uuid": None if uuid is None else str(uuid),
        "pci": None,
    }
    if isinstance(bus, int):
        domain = getattr(props, "pci_domain_id", 0)
        device = getattr(props, "pci_device_id", 0)
        identity["pci"] = [int(domain or 0), bus, int(device or 0)]
    return identity


# ---------------------------------------------------------------------------------- role "pairs"
class PairBench:
    """Peer copies between the GPUs of this process, many at once: each ordered pair (src, dst)
    copies on a stream of its own on the source GPU (torch copies on the source's current stream)
    with a stream of its own current on the destination, so no copy waits for another."""

    def __init__(self, cfg: Record, torch: Any) -> None:
        self.cfg, self.torch = cfg, torch
        self.devices = [int(d) for d in cfg["devices"]]
        self.size = int(cfg["pair_copy_bytes"])
        self.repetitions = max(1, int(cfg.get("repetitions", 5)))
        self.max_iters = int(cfg.get("max_iters", 200))
        self.send: Dict[int, Any] = {}
        self.recv: Dict[Tuple[int, int], Any] = {}
        self.streams: Dict[Tuple[int, int], Tuple[Any, Any]] = {}

    def peer_access(self) -> Dict[str, bool]:
        found = {}
        for src in self.devices:
            for dst in self.devices:
                if src != dst:
                    ok = self.torch.cuda.can_device_access_peer(src, dst)
                    found["%d>%d" % (src, dst)] = bool(ok)
        return found

    def _buffers(self, src: int, dst: int) -> Tuple[Any, Any]:
        torch = self.torch
        if src not in self.send:
            self.send[src] = torch.empty(
                self.size, dtype=torch.uint8, device=torch.device("cuda", src)
            )
        if (src, dst) not in self.recv:
            device = torch.device("cuda", dst)
            self.recv[(src, dst)] = torch.empty(self.size, dtype=torch.uint8, device=device)
        if (src, dst) not in self.streams:
            self.streams[(src, dst)] = (
                torch.cuda.Stream(device=torch.device("cuda", src)),
                torch.cuda.Stream(device=torch.device("cuda", dst)),
            )
        return self.send[src], self.recv[(src, dst)]

    def release(self) -> None:
        self.send.clear()
        self.recv.clear()
        self.streams.clear()
        for device in self.devices:
            with self.torch.cuda.device(device):
                self.torch.cuda.synchronize()
                self.torch.cuda.empty_cache()

    def _run(self, copies: List[Tuple[int, int]], iters: int) -> List[float]:
        """Every copy of `copies` `iters` times, all started together behind one gate; seconds
        per copy of each, from its own events."""
        torch = self.torch
        sleep = getattr(torch.cuda, "_sleep", None)
        gate = None
        if sleep is not None and len(copies) > 1:
            gate = torch.cuda.Event()
            first = self.streams[copies[0]][0]
            with torch.cuda.stream(first):
                sleep(int(gate_seconds(len(copies) * iters) * 2e9))  # cycles, at about 2 GHz
                gate.record(first)
        events = []
        for src, dst in copies:
            send, recv = self.send[src], self.recv[(src, dst)]
            src_stream, dst_stream = self.streams[(src, dst)]
            torch.cuda.set_stream(dst_stream)  # current on dst: the copy's barrier partner
            torch.cuda.set_stream(src_stream)  # current on src: the copy runs here
            if gate is not None:
                src_stream.wait_event(gate)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(src_stream)
            for _ in range(iters):
                recv.copy_(send, non_blocking=True)
            end.record(src_stream)
            events.append((start, end))
        for device in self.devices:  # the default streams current again, before any wait
            torch.cuda.set_stream(torch.cuda.default_stream(device))
        for _, end in events:
            end.synchronize()
        return [float(s.elapsed_time(e)) / 1e3 / iters for s, e in events]

    def concurrent(self, copies: List[Tuple[int, int]], budget_s: float) -> List[Record]:
        """GB/s of each copy of `copies` while all of them run (median of the repetitions)."""
        for src, dst in copies:
            self._buffers(src, dst)
        self._run(copies, 1)  # warm-up: peer access enabled, streams and events made
        estimate = max(self._run(copies, 1))
        iters = iterations_for(estimate, budget_s / self.repetitions, 2, self.max_iters)
        samples = [self._run(copies, iters) for _ in range(self.repetitions)]
        results = []
        for position in range(len(copies)):
            timing = spread([sample[position] for sample in samples])
            timing.update(iterations=iters, repetitions=self.repetitions)
            results.append(copy_result(self.size, timing))
        return results

    def run_phase(self, phase: str, budget_s: float) -> Record:
        """`pairs:one_way`: each round's pairs a→b together, then b→a; `pairs:both_ways`: both
        directions of each round's pairs together; `pairs:all_active`: every ordered pair."""
        rounds = [[(int(a), int(b)) for a, b in pairs] for pairs in self.cfg["rounds"]]
        steps: List[List[Tuple[int, int]]] = []
        if phase == "pairs:one_way":
            for pairs in rounds:
                steps += [pairs, [(b, a) for a, b in pairs]]
        elif phase == "pairs:both_ways":
            steps = [pairs + [(b, a) for a, b in pairs] for pairs in rounds]
        elif phase == "pairs:all_active":
            steps = [[(a, b) for a in self.devices for b in self.devices if a != b]]
        else:
            raise ValueError("unknown phase %r" % phase)
        found: Dict[str, Record] = {}
        deadline = time.monotonic() + 2 * budget_s + 5
        for position, copies in enumerate(steps):
            if time.monotonic() > deadline:
                self.release()
                return {"copies": found, "stopped_early": True, "steps_done": position}
            for (src, dst), result in zip(copies, self.concurrent(copies, budget_s / len(steps))):
                found["%d>%d" % (src, dst)] = result
        self.release()
        return {"copies": found}


# ---------------------------------------------------------------------------------- main
def pin_to_cpus(cfg: Record) -> Optional[str]:
    """Run on the CPUs next to the GPU, so pinned host memory lands on its NUMA node."""
    cpus = cfg.get("cpus")
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return None
    try:
        os.sched_setaffinity(0, set(int(c) for c in cpus))
    except (OSError, ValueError) as exc:
        return str(describe(exc))
    return None


def serve(cfg: Record, torch: Any) -> None:
    """Announce, then run each phase the probe orders, in order."""
    role = cfg["role"]
    bench: Any = GpuBench(cfg, torch) if role == "gpu" else PairBench(cfg, torch)
    hello: Record = {"started": True, "role": role, "torch_version": str(torch.__version__)}
    if role == "gpu":
        hello["identity"] = bench.identity()
    else:
        hello["peer_access"] = bench.peer_access()
    emit(cfg, hello)
    for phase in cfg["phases"]:
        budget_s = next_order(cfg, phase)
        if budget_s is None:
            return
        started = time.perf_counter()
        try:
            result = bench.run_phase(phase, budget_s)
        except Exception as exc:  # this phase's error is its result; the next may still run
            result = {"error": describe(exc)}
            try:
                bench.free() if role == "gpu" else bench.release()
            except Exception:  # a GPU in a bad state: the next phase says so
                pass
        result.update(phase=phase, elapsed_s=round(time.perf_counter() - started, 3))
        emit(cfg, result)
    emit(cfg, {"done": True})


def main(argv: Optional[List[str]] = None) -> None:
    cfg = json.loads((argv or sys.argv)[1])
    guard(cfg)
    pinned = pin_to_cpus(cfg)
    import torch

    if pinned:
        emit(cfg, {"warning": "could not pin to the GPU's CPUs: " + pinned})
    try:
        serve(cfg, torch)
    except Exception as exc:  # CUDA refused this GPU: say why, exit non-zero
        emit(cfg, {"fatal": describe(exc)})
        raise


if __name__ == "__main__":  # run by _worker_io.PROGRAM, which took the working directory off
    main()
