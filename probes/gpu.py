"""GPUs, driver and CUDA driver versions, PCIe links, topology and P2P support, from nvidia-smi."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

TIMEOUT_S = 60
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py).
# The current PCIe link generation drops at idle (power saving), so only the maximum is a fact.
FACTS = {
    "identity": ["gpus[*].uuid", "gpus[*].pci_bus_id", "gpus[*].serial"],
    "volatile": [
        "gpus[*].pcie_gen",
        "command_errors",
        "visibility.cuda_visible_devices",
        "visibility.slurm_gpus",
    ],
    # what the machine is: unlike between cohorts by nature (fleet/analysis/across_hosts/findings.py)
    "hardware": [
        "gpus",
        "gpus[*].*",
        "gpu_count",
        "interconnect",
        "topology.*",
        "p2p_read.*",
        "visibility.task_gpus",
    ],
}
# Every GPU the driver knows, whatever this process may open: under Slurm's device cgroups
# nvidia-smi lists only the task's GPUs, this folder still lists the node's.
DRIVER_GPUS_DIR = "/proc/driver/nvidia/gpus"
COMMAND_TIMEOUT_S = 15.0


def command_timeout(options: Dict[str, Any]) -> float:
    """Each nvidia-smi command's timeout: the option `command_timeout_s`. `timeout_s` is the
    probe's own deadline to the runner; before issue 47 this probe read it as the command
    timeout too, so an inventory's probe_args that says only `timeout_s` still sets it."""
    return float(options.get("command_timeout_s", options.get("timeout_s", COMMAND_TIMEOUT_S)))


# The fields asked of `--query-gpu`, in order. The parser reads columns by header name, so an
# older driver's reply (or a capture of a shorter query) still parses: absent columns become null.
QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "compute_cap",
    "memory.total",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "mig.mode.current",
)
QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv")
# Drivers older than ~510 reject `compute_cap`; asking again without it keeps the rest.
LEGACY_QUERY_ARGS = (
    "--query-gpu=" + ",".join(f for f in QUERY_FIELDS if f != "compute_cap"),
    "--format=csv",
)
TOPOLOGY_ARGS = ("topo", "-m")
P2P_READ_ARGS = ("topo", "-p2p", "r")
QUERY_ALL_ARGS = ("-q",)

# csv header name (units stripped) -> our field name, and how to read its value.
GPU_COLUMNS = {
    "index": ("index", "int"),
    "name": ("name", "str"),
    "uuid": ("uuid", "str"),
    "pci.bus_id": ("pci_bus_id", "str"),
    "driver_version": ("driver_version", "str"),
    "compute_cap": ("compute_capability", "str"),
    "memory.total": ("memory_mib", "int"),
    "pcie.link.gen.current": ("pcie_gen", "int"),
    "pcie.link.gen.max": ("pcie_gen_max", "int"),
    "pcie.link.width.current": ("pcie_width", "int"),
    "pcie.link.width.max": ("pcie_width_max", "int"),
    "persistence_mode": ("persistence_mode", "str"),
    "mig.mode.current": ("mig_mode", "str"),
}
GPU_FIELDS = tuple(field for field, _ in GPU_COLUMNS.values())

# nvidia-smi's ways of saying "no value": "[N/A]", "N/A", "[Not Supported]", "[Unknown Error]".
MISSING_VALUE = re.compile(
    r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions)\]?$", re.IGNORECASE
)
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# The same SGR codes in pasted captures that lost the ESC byte (`[4mGPU0 … [0m`), or show it as
# `^[` (cat -v) or U+FFFD (a bad decode). nvidia-smi's own text never has `[digits m`.
LOST_ESCAPE = re.compile(r"(?:\^\[|\ufffd)?\[[0-9;]*m")
# A link cell of `topo -m`: X (self), NV#, PIX, PXB, PHB, NODE, SYS, SOC (old drivers), ...
LINK_CELL = re.compile(r"^(X|[A-Z]+[0-9]*)$")
DEVICE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*[0-9]$")  # GPU0, NIC3, mlx5_0 (old drivers)
EXCERPT_CHARS = 60
# `topo -m` headers that are not devices; all the others (GPU0, NIC0, or mlx5_0 on old drivers) are.
TOPOLOGY_EXTRA_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")
DRIVER_VERSION = re.compile(r"Driver Version\s*:\s*([0-9][0-9.]*)")
GPU_DEVICE = re.compile(r"^GPU\d+$")
NVLINK_CELL = re.compile(r"^NV\d+$")


# ---------------------------------------------------------------- pure parsers


def parse_query_gpu(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-gpu=... --format=csv` (header line included) -> one dict a GPU."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [_column_name(cell) for cell in _split_csv_line(lines[0])]
    return [_gpu_from_row(header, _split_csv_line(line)) for line in lines[1:]]


def parse_topology(text: str) -> Dict[str, Any]:
    """`nvidia-smi topo -m` -> devices, the link matrix, CPU/NUMA affinity and the NIC legend.

    What cannot be read is said in `parse_errors` (present only then): a header or row that is
    not nvidia-smi's, rows missing. An unreadable row stays in the matrix as [] (rows follow the
    header's device order), and the interconnect is then not guessed (see _interconnect)."""
    lines = [_plain(line) for line in text.splitlines()]
    topology = _empty_topology()
    topology["nics"] = parse_nic_legend(text)
    header_at = _header_index(lines)
    if header_at is None:
        return _with_errors(topology, _no_header(lines))
    devices, extra_columns = _topology_header(_from_gpu0(lines[header_at]))
    problem = _bad_header(devices)
    if problem:
        return _with_errors(topology, ["header %s: %s" % (_excerpt(lines[header_at]), problem)])
    topology["devices"] = devices
    errors = []
    for line in _matrix_rows(lines[header_at + 1 :]):
        error = _add_topology_row(topology, line.split(), devices, extra_columns)
        if error:
            errors.append(error)
    missing = devices[len(topology["matrix"]) :]
    if missing:
        errors.append("no row for %s (the capture ends first)" % ", ".join(missing))
    return _with_errors(topology, errors)


def parse_nic_legend(text: str) -> Dict[str, str]:
    """The `NIC Legend:` block under `topo -m` -> {"NIC0": "mlx5_0", ...}."""
    nics: Dict[str, str] = {}
    in_legend = False
    for line in _plain(text).splitlines():
        if line.strip().startswith("NIC Legend"):
            in_legend = True
            continue
        match = NIC_LEGEND_ENTRY.match(line) if in_legend else None
        if match:
            nics[match.group(1)] = match.group(2)
    return nics


def parse_p2p(text: str) -> Dict[str, Dict[str, str]]:
    """`nvidia-smi topo -p2p r|rw|...` -> {"GPU0": {"GPU1": "OK" | "CNS" | "NS" ...}}, no self."""
    lines = [_plain(line) for line in text.splitlines()]
    header_at = _header_index(lines)
    if header_at is None:
        return {}
    columns = _from_gpu0(lines[header_at]).split()
    matrix: Dict[str, Dict[str, str]] = {}
    for line in _matrix_rows(lines[header_at + 1 :]):
        row, *cells = line.split()
        pairs = zip(columns, cells)
        matrix[row] = {peer: cell for peer, cell in pairs if peer != row}
    return matrix


def parse_versions(text: str) -> Dict[str, Optional[str]]:
    """Driver and CUDA driver versions from `nvidia-smi -q` or the plain `nvidia-smi` banner."""
    driver = DRIVER_VERSION.search(text)
    cuda = CUDA_VERSION.search(text)  # "CUDA Version : Not Found" (vGPU hosts) stays null
    return {
        "driver_version": driver.group(1) if driver else None,
        "cuda_driver_version": cuda.group(1) if cuda else None,
    }


def classify_interconnect(matrix: Sequence[Sequence[str]], devices: Sequence[str]) -> str:
    """How the GPUs reach each other: "nvlink", "pcie", "mixed", "single" (one GPU) or "none"."""
    gpu_positions = [i for i, name in enumerate(devices) if GPU_DEVICE.match(name)]
    if not gpu_positions:
        return "none"
    if len(gpu_positions) == 1:
        return "single"
    links = {
        bool(NVLINK_CELL.match(matrix[i][j]))
        for i in gpu_positions
        for j in gpu_positions
        if i != j and i < len(matrix) and j < len(matrix[i])
    }
    if links == {True}:
        return "nvlink"
    return "mixed" if True in links else "pcie"


def build_data(
    query_text: str,
    versions_text: Optional[str],
    topology_text: Optional[str],
    p2p_text: Optional[str],
) -> Dict[str, Any]:
    """The probe's `data` from the outputs of its commands (None: that command gave nothing)."""
    gpus = parse_query_gpu(query_text)
    versions = parse_versions(versions_text or "")
    topology = parse_topology(topology_text) if topology_text is not None else None
    interconnect = _interconnect(topology, gpus)
    return {
        "driver_version": _first_driver_version(gpus) or versions["driver_version"],
        "cuda_driver_version": versions["cuda_driver_version"],
        "gpu_count": len(gpus),
        "gpus": gpus,
        "topology": topology,
        "p2p_read": parse_p2p(p2p_text) if p2p_text is not None else None,
        "interconnect": interconnect,
    }


# ---------------------------------------------------------------- parser helpers


def _split_csv_line(line: str) -> List[str]:
    # nvidia-smi never quotes its csv, and GPU names carry no commas.
    return [cell.strip() for cell in line.split(",")]


def _column_name(header_cell: str) -> str:
    # "memory.total [MiB]" -> "memory.total"
    return header_cell.split("[")[0].strip()


def _gpu_from_row(header: List[str], cells: List[str]) -> Dict[str, Any]:
    gpu: Dict[str, Any] = dict.fromkeys(GPU_FIELDS)
    for column, raw in zip(header, cells):
        if column in GPU_COLUMNS:
            field, kind = GPU_COLUMNS[column]
            gpu[field] = _int_value(raw) if kind == "int" else _str_value(raw)
    return gpu


def _str_value(raw: str) -> Optional[str]:
    raw = raw.strip()
    return None if not raw or MISSING_VALUE.match(raw) else raw


def _int_value(raw: str) -> Optional[int]:
    value = _str_value(raw)
    if value is None:
        return None
    match = re.match(r"^(\d+)", value)  # "143771 MiB" -> 143771
    return int(match.group(1)) if match else None


def _plain(text: str) -> str:
    return LOST_ESCAPE.sub("", ANSI_ESCAPE.sub("", text))


def _excerpt(line: str) -> str:
    line = " ".join(line.split())
    return repr(line if len(line) <= EXCERPT_CHARS else line[:EXCERPT_CHARS] + "...")


def _with_errors(topology: Dict[str, Any], errors: List[str]) -> Dict[str, Any]:
    if errors:
        topology["parse_errors"] = errors
    return topology


def _no_header(lines: List[str]) -> List[str]:
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        return []  # nothing printed: not a parse error (the command's own status says why)
    return ["no header line naming GPU0 (the first line reads %s)" % _excerpt(first)]


def _bad_header(devices: List[str]) -> Optional[str]:
    """Why a header's device list is not one (e.g. a capture whose line breaks were lost)."""
    odd = next((name for name in devices if not DEVICE_NAME.match(name)), None)
    if odd is not None:
        return "%r is not a device name" % odd
    repeated = sorted({name for name in devices if devices.count(name) > 1})
    return "%s listed twice" % ", ".join(repeated) if repeated else None


def _empty_topology() -> Dict[str, Any]:
    return {
        "devices": [],
        "matrix": [],
        "cpu_affinity": {},
        "numa_affinity": {},
        "gpu_numa_id": {},
        "nics": {},
    }


def _header_index(lines: List[str]) -> Optional[int]:
    """The header of a GPU matrix: the first line naming GPU0 that is not GPU0's own row."""
    for i, line in enumerate(lines):
        tokens = line.split()
        if "GPU0" in tokens and tokens[:2] != ["GPU0", "X"]:
            return i
    return None


def _from_gpu0(header: str) -> str:
    # Drops whatever a pasted capture put before the columns, e.g. the command line itself.
    return header[header.index("GPU0") :]


def _topology_header(line: str) -> Tuple[List[str], List[str]]:
    """Split the header into device names and the trailing columns that exist in this driver."""
    extra_columns = [name for name in TOPOLOGY_EXTRA_COLUMNS if name in line]
    for name in extra_columns:
        line = line.replace(name, " ")
    extra_columns.sort(key=lambda name: TOPOLOGY_EXTRA_COLUMNS.index(name))
    return line.split(), extra_columns


def _matrix_rows(lines: List[str]) -> List[str]:
    """The rows under a header, up to the blank line or `Legend:` that ends the matrix."""
    rows = []
    for line in lines:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        rows.append(line)
    return rows


def _add_topology_row(
    topology: Dict[str, Any], tokens: List[str], devices: List[str], extra_columns: List[str]
) -> Optional[str]:
    """Add one matrix row; the reason it cannot be read, if so (it then stays [])."""
    # Splitting on any whitespace copes with both tab layouts (where nvidia-smi pads the NUMA
    # column with an extra tab) and captures pasted with tabs turned into spaces.
    name, cells = tokens[0], tokens[1 : 1 + len(devices)]
    problem = _bad_row(name, cells, devices, len(topology["matrix"]))
    if problem:
        topology["matrix"].append([])
        return "row %s: %s" % (_excerpt(" ".join(tokens)), problem)
    topology["matrix"].append(cells)
    extras = dict(zip(extra_columns, tokens[1 + len(devices) :]))
    for column, key in (
        ("CPU Affinity", "cpu_affinity"),
        ("NUMA Affinity", "numa_affinity"),
        ("GPU NUMA ID", "gpu_numa_id"),
    ):
        if column in extras:
            topology[key][name] = _str_value(extras[column])
    return None


def _bad_row(name: str, cells: List[str], devices: List[str], position: int) -> Optional[str]:
    expected = devices[position] if position < len(devices) else None
    if name != expected:
        return "expected the row of %s here" % (expected or "no device (all rows read)")
    if len(cells) < len(devices) or not all(LINK_CELL.match(cell) for cell in cells):
        return "not %d link cells (X, NV#, PIX, PXB, PHB, NODE, SYS)" % len(devices)
    return None


def _interconnect(topology: Optional[Dict[str, Any]], gpus: List[Dict[str, Any]]) -> Optional[str]:
    if topology is None or not topology["devices"]:
        # No matrix to read: only the GPU count can still be told apart.
        return {0: "none", 1: "single"}.get(len(gpus))
    if not _gpu_rows_complete(topology):
        return None  # unreadable GPU rows (parse_errors): unknown, not a guess
    return classify_interconnect(topology["matrix"], topology["devices"])


def _gpu_rows_complete(topology: Dict[str, Any]) -> bool:
    devices, matrix = topology["devices"], topology["matrix"]
    return all(
        i < len(matrix) and len(matrix[i]) == len(devices)
        for i, name in enumerate(devices)
        if GPU_DEVICE.match(name)
    )


def _first_driver_version(gpus: List[Dict[str, Any]]) -> Optional[str]:
    return next((gpu["driver_version"] for gpu in gpus if gpu.get("driver_version")), None)


# ---------------------------------------------------------------- touching the host


class CommandFailed(Exception):
    """nvidia-smi ran but failed: its own message, as the user would read it."""


def run_nvidia_smi(executable: str, args: Sequence[str], timeout_s: float) -> str:
    """Run one nvidia-smi command under its own timeout; its stdout, or CommandFailed."""
    try:
        completed = subprocess.run(
            [executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(f"nvidia-smi {' '.join(args)} timed out after {timeout_s:g} s") from exc
    stdout = completed.stdout.decode("utf-8", "replace")
    if completed.returncode != 0:
        # nvidia-smi prints its failures ("NVIDIA-SMI has failed because...") on stdout.
        message = completed.stderr.decode("utf-8", "replace").strip() or stdout.strip()
        raise CommandFailed(f"{message} (exit code {completed.returncode})".strip())
    return stdout


def _run_query(executable: str, timeout_s: float) -> str:
    try:
        return run_nvidia_smi(executable, QUERY_ARGS, timeout_s)
    except CommandFailed as exc:
        if "compute_cap" not in str(exc):
            raise
        return run_nvidia_smi(executable, LEGACY_QUERY_ARGS, timeout_s)


def _run_optional(
    executable: str, args: Sequence[str], timeout_s: float, errors: Dict[str, str]
) -> Optional[str]:
    """A command whose failure leaves a gap in the data, not a failed probe."""
    try:
        return run_nvidia_smi(executable, args, timeout_s)
    except CommandFailed as exc:
        errors["nvidia-smi " + " ".join(args)] = str(exc)
        return None


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Touch the host; return {"ok": bool, "data": {...}, "error": str | None}.

    ok is False when nvidia-smi is absent or its GPU query fails (no driver, no GPU): facts about
    the host. A failing `topo` or `-q` leaves null in its field and its message in
    data["command_errors"], and ok stays True.
    """
    timeout_s = command_timeout(options)
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return {"ok": False, "data": {}, "error": "nvidia-smi not found"}
    try:
        query_text = _run_query(executable, timeout_s)
    except CommandFailed as exc:
        return {"ok": False, "data": {"nvidia_smi": executable}, "error": str(exc)}
    errors: Dict[str, str] = {}
    data = build_data(
        query_text,
        _run_optional(executable, QUERY_ALL_ARGS, timeout_s, errors),
        _run_optional(executable, TOPOLOGY_ARGS, timeout_s, errors),
        _run_optional(executable, P2P_READ_ARGS, timeout_s, errors),
    )
    data["nvidia_smi"] = executable
    data["command_errors"] = errors
    data["visibility"] = gpu_visibility(len(data.get("gpus") or []), os.environ, _driver_gpus())
    return {"ok": True, "data": data, "error": None}


def gpu_visibility(
    task_gpus: int, environ: Mapping[str, str], node_gpus: Optional[int]
) -> Dict[str, Any]:
    """GPUs this task sees against GPUs the node has, and what restricted it (CUDA, Slurm)."""
    slurm = environ.get("SLURM_STEP_GPUS") or environ.get("SLURM_JOB_GPUS")
    return {
        "task_gpus": task_gpus,
        "node_gpus": node_gpus,
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "slurm_gpus": slurm,
        "restricted": node_gpus is not None and task_gpus < node_gpus,
    }


def _driver_gpus() -> Optional[int]:
    try:
        return len(os.listdir(DRIVER_GPUS_DIR))
    except OSError:
        return None


if __name__ == "__main__":
    import json
    import sys

    del sys.path[0]  # so that `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
