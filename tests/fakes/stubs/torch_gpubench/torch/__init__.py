"""A fake torch whose "GPUs" take simulated time: for the gpubench probe's tests without GPUs.

What the probe and its worker (probes/helpers/gpubench/_gpubench_worker.py) call is here, nothing more. Each stream
runs its work in real time, concurrently with the others: an operation starts when the stream's
last one ends (or now), lasts what the machine's rates say (a matmul of F flops at T TFLOPS:
F/T/1e12 s), and waiting for an event or a device sleeps until then; so budgets and deadlines
behave as on a GPU. FLEET_FAKE_GPUBENCH (JSON) sets the machine:
    {"gpus": 2, "scale": [1.0, 0.8],          # each GPU's speed, times the H200-like base rates
     "peer_scale": {"0>1": 0.5},               # a slow link, one direction
     "hang": {"gpu": 1, "op": "memcpy"},       # that GPU never finishes that kind of work
     "fp8": true, "name": "NVIDIA H200", "capability": [9, 0]}
Stdlib only, Python 3.8.
"""

import contextlib
import json
import multiprocessing
import os
import sys
import time

__version__ = "2.99.0+fakegpubench"
SPEC = json.loads(os.environ.get("FLEET_FAKE_GPUBENCH") or "{}")
COUNT = int(SPEC.get("gpus", 2))
BASE = {  # per second: TFLOPS for matmuls, GB/s for copies (memcpy counts read + write)
    "bfloat16": 670.0,
    "float16": 660.0,
    "float8_e4m3fn": 1300.0,
    "memcpy": 4200.0,
    "h2d": 55.0,
    "d2h": 54.0,
    "peer": 390.0,
}


class dtype:
    def __init__(self, name, size):
        self.name, self.size = name, size

    def __repr__(self):
        return "torch." + self.name


bfloat16 = dtype("bfloat16", 2)
float16 = dtype("float16", 2)
float32 = dtype("float32", 4)
uint8 = dtype("uint8", 1)
if SPEC.get("fp8", True):
    float8_e4m3fn = dtype("float8_e4m3fn", 1)


class device:
    def __init__(self, kind, index=None):
        if isinstance(kind, device):
            kind, index = kind.type, kind.index
        self.type, self.index = kind, index

    def __eq__(self, other):
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


CPU = device("cpu")


def _speed(gpu, kind):
    scales = SPEC.get("scale") or []
    scale = scales[gpu] if gpu < len(scales) else 1.0
    return BASE[kind] * scale


class Tensor:
    def __init__(self, shape, kind, where, pinned=False):
        self.shape = tuple(shape)
        self.dtype = kind
        self.device = where
        self.pinned = pinned

    @property
    def nbytes(self):
        count = 1
        for d in self.shape:
            count *= d
        return count * self.dtype.size

    def to(self, kind):
        return Tensor(self.shape, kind, self.device)

    def t(self):
        return Tensor(tuple(reversed(self.shape)), self.dtype, self.device)

    def copy_(self, src, non_blocking=False):
        if self.device.type == "cuda" and src.device.type == "cuda":
            if self.device.index == src.device.index:
                gpu = self.device.index
                _work(gpu, "memcpy", 2 * self.nbytes / _speed(gpu, "memcpy") / 1e9)
            else:
                key = "%d>%d" % (src.device.index, self.device.index)
                rate = _speed(src.device.index, "peer") * (SPEC.get("peer_scale") or {}).get(
                    key, 1.0
                )
                _work(src.device.index, "peer", self.nbytes / rate / 1e9)
        elif self.device.type == "cuda":
            gpu = self.device.index
            _work(gpu, "h2d", self.nbytes / _speed(gpu, "h2d") / 1e9)
        elif src.device.type == "cuda":
            gpu = src.device.index
            _work(gpu, "d2h", self.nbytes / _speed(gpu, "d2h") / 1e9)
        return self


def _where(where):
    if where is None:
        return CPU
    if isinstance(where, device):
        return where
    if isinstance(where, int):
        return device("cuda", where)
    kind, _, index = str(where).partition(":")
    return device(kind, int(index) if index else cuda.current_device())


def empty(*shape, dtype=float32, device=None, pin_memory=False):
    if len(shape) == 1 and isinstance(shape[0], tuple):
        shape = shape[0]
    return Tensor(shape, dtype, _where(device), pin_memory)


def randn(*shape, device=None, dtype=float32):
    return empty(*shape, dtype=dtype, device=device)


def ones(shape, device=None, dtype=float32):
    return empty(*shape, dtype=dtype, device=device)


def matmul(a, b, out=None):
    m, k = a.shape
    n = b.shape[1]
    gpu = a.device.index
    _work(gpu, a.dtype.name, 2.0 * m * n * k / _speed(gpu, a.dtype.name) / 1e12)
    return out if out is not None else Tensor((m, n), a.dtype, a.device)


def _scaled_mm(a, b, scale_a=None, scale_b=None, out_dtype=None):
    m, k = a.shape
    n = b.shape[1]
    gpu = a.device.index
    _work(gpu, "float8_e4m3fn", 2.0 * m * n * k / _speed(gpu, "float8_e4m3fn") / 1e12)
    return Tensor((m, n), out_dtype or bfloat16, a.device)


# ------------------------------------------------------------------------------ streams and time
class Stream:
    def __init__(self, device=None, priority=0):
        where = _where(device) if device is not None else _where(cuda.current_device())
        self.device = where
        self.device_index = where.index
        self.clock = 0.0  # when its last operation ends (time.monotonic())
        self.hung = False

    def wait_event(self, event):
        self.clock = max(self.clock, event.stamp)


_current = {}
_default = {}
_device = [0]


def _stream_of(gpu):
    if gpu not in _default:
        _default[gpu] = Stream(device("cuda", gpu))
    return _current.get(gpu) or _default[gpu]


def _work(gpu, kind, seconds):
    stream = _stream_of(gpu)
    hang = SPEC.get("hang") or {}
    if hang.get("gpu") == gpu and hang.get("op") == kind:
        stream.hung = True
    stream.clock = max(stream.clock, time.monotonic()) + seconds


def _wait(stream, until):
    if stream.hung:
        time.sleep(3600)
    time.sleep(max(0.0, until - time.monotonic()))


class Event:
    def __init__(self, enable_timing=False):
        self.stamp = 0.0
        self.stream = None

    def record(self, stream=None):
        self.stream = stream or _stream_of(_device[0])
        self.stamp = max(self.stream.clock, time.monotonic())

    def synchronize(self):
        if self.stream is not None:
            _wait(self.stream, self.stamp)

    def elapsed_time(self, end):
        return (end.stamp - self.stamp) * 1e3  # milliseconds


class _Props:
    def __init__(self, index):
        self.name = SPEC.get("name", "NVIDIA H200")
        self.major, self.minor = SPEC.get("capability", [9, 0])
        self.total_memory = 150 << 30
        self.uuid = "%08x-0000-0000-0000-%012x" % (0xFA4E0000 + index, index)
        self.pci_bus_id = 0x18 + index
        self.pci_domain_id = 0
        self.pci_device_id = 0


class _Cuda:
    Stream = Stream
    Event = Event

    @staticmethod
    def is_available():
        return COUNT > 0

    @staticmethod
    def device_count():
        return COUNT

    @staticmethod
    def set_device(where):
        _device[0] = _where(where).index

    @staticmethod
    def current_device():
        return _device[0]

    @staticmethod
    def get_device_properties(index):
        return _Props(index)

    @staticmethod
    def get_device_name(index=0):
        return _Props(index).name

    @staticmethod
    def get_device_capability(index=None):
        return tuple(SPEC.get("capability", [9, 0]))

    @staticmethod
    def can_device_access_peer(src, dst):
        return src != dst

    @staticmethod
    def synchronize(where=None):
        gpu = _device[0] if where is None else _where(where).index
        streams = [_default.get(gpu), *_current.values()]
        for stream in streams:
            if stream is not None and stream.device_index == gpu:
                _wait(stream, stream.clock)

    @staticmethod
    def empty_cache():
        pass

    @staticmethod
    def current_stream(where=None):
        return _stream_of(_device[0] if where is None else _where(where).index)

    @staticmethod
    def default_stream(where=None):
        gpu = _device[0] if where is None else _where(where).index
        _stream_of(gpu)
        return _default[gpu]

    @staticmethod
    def set_stream(stream):
        _current[stream.device_index] = stream
        _device[0] = stream.device_index

    @staticmethod
    @contextlib.contextmanager
    def stream(stream):
        before, before_device = _current.get(stream.device_index), _device[0]
        _cuda.set_stream(stream)
        try:
            yield stream
        finally:
            _current[stream.device_index] = before
            _device[0] = before_device

    @staticmethod
    @contextlib.contextmanager
    def device(where):
        before = _device[0]
        _device[0] = _where(where).index
        try:
            yield
        finally:
            _device[0] = before

    @staticmethod
    def _sleep(cycles):
        _work(_device[0], "sleep", cycles / 2e9)


cuda = _cuda = _Cuda()
sys.modules[__name__ + ".multiprocessing"] = multiprocessing  # bench/gpubench_reference.py's
