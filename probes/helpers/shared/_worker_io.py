"""A probe's worker processes and how they talk: the allreduce ranks and the gpubench workers.

Not a probe (the leading underscore): a helper that allreduce and gpubench ship (`SHIPS`). It has
two sides. The probe's: `worker_program` makes the `python -c` program a worker runs; a worker
runs in a fresh interpreter where the host runner serves no helper, so the program carries this
module's text and the worker's and makes this module importable before it runs the worker as
`__main__`. Nothing is written on the host. The worker's: `guard` (its hard deadline, and its
end when its probe is gone), `emit` (`MARKER {json}` lines on stdout, where NCCL_DEBUG output
may share the stream), `ask` (a line of JSON read on stdin: the probe paces the worker) and
`describe` (an error, bounded). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, Mapping, Optional

Record = Dict[str, Any]
IO_FILE = "_worker_io.py"
# The `python -c` program: this module from its text, then the worker's text as __main__. `-c`
# puts the working directory first on sys.path: out, so a torch.py there cannot shadow torch.
PROGRAM = (
    "import sys, types\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "io = types.ModuleType(%r)\n"
    "exec(compile(%r, %r, 'exec'), io.__dict__)\n"
    "sys.modules[io.__name__] = io\n"
    "exec(compile(%r, %r, 'exec'), {'__name__': '__main__'})\n"
)


# ------------------------------------------------------------------------- the probe's side
def shipped_text(shipped: Optional[Mapping[str, str]], file_name: str) -> str:
    """A shipped file's text: from the bundle on a host (the probe's `__shipped__`), else from
    where its module is found (probes/helpers/FAMILY/, run by hand or in the tests)."""
    if shipped and file_name in shipped:
        return str(shipped[file_name])
    spec = importlib.util.find_spec(file_name[:-3])
    if spec is None or not spec.origin:
        raise ImportError("%s is neither shipped nor found" % file_name)
    with open(spec.origin, encoding="utf-8") as handle:
        return handle.read()


def worker_program(worker_file: str, shipped: Optional[Mapping[str, str]]) -> str:
    """The `python -c` program that runs `worker_file` with this module importable."""
    worker = shipped_text(shipped, worker_file)
    return PROGRAM % (IO_FILE[:-3], shipped_text(shipped, IO_FILE), IO_FILE, worker, worker_file)


# ------------------------------------------------------------------------ the worker's side
def guard(cfg: Record) -> None:
    """The worker's hard deadline (SIGALRM's default action ends the process), and its end as
    soon as its probe is gone: an orphaned worker must not keep a GPU or a port."""
    signal.alarm(int(cfg["hard_timeout_s"]))
    threading.Thread(target=_watch_parent, args=(cfg["parent_pid"],), daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(3)


def emit(cfg: Record, record: Record) -> None:
    """One `MARKER {json}` line on stdout, for the probe."""
    sys.stdout.write(cfg["marker"] + json.dumps(record) + "\n")
    sys.stdout.flush()


def ask(cfg: Record, record: Record) -> Optional[Record]:
    """Emit `record`, then read the probe's answer, one JSON object on stdin; None when there is
    none (the end of stdin, an empty line, not a JSON object)."""
    emit(cfg, record)
    line = sys.stdin.readline()
    try:
        answer = json.loads(line) if line.strip() else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def describe(exc: BaseException) -> str:
    """`TypeName: message`, at most 500 chars."""
    return ("%s: %s" % (type(exc).__name__, exc))[:500]
