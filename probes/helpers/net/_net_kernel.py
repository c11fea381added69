"""The kernel side of RDMA: the modules that matter (loaded or not, with their versions) and whether
GPUDirect RDMA is possible (a peer-memory module, or dma-buf with the open NVIDIA module).

Not a probe (the leading underscore): shipped with the net probe (its `SHIPS`), stdlib only,
Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional, Tuple

from _net_tree import Tree

SYS_MODULE = "sys/module"
PROC_MODULES = "proc/modules"
PROC_OSRELEASE = "proc/sys/kernel/osrelease"
PROC_NVIDIA_VERSION = "proc/driver/nvidia/version"

# Kernel modules that decide what the RDMA stack can do: the Mellanox/NVIDIA NIC driver and its
# verbs provider, the RDMA core, IPoIB, AWS EFA, and the two ways GPU memory is registered with a
# NIC (nvidia_peermem in the NVIDIA driver; nv_peer_mem, Mellanox's older out-of-tree module).
MODULES = (
    "mlx5_core",
    "mlx5_ib",
    "ib_core",
    "ib_uverbs",
    "rdma_cm",
    "ib_ipoib",
    "efa",
    "nvidia",
    "nvidia_peermem",
    "nv_peer_mem",
)
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
# dma-buf registration of GPU memory (ibv_reg_dmabuf_mr): Linux 5.12+ with the open NVIDIA module.
DMABUF_KERNEL = (5, 12)


def parse_proc_modules(text: str) -> Dict[str, str]:
    """/proc/modules -> {module: state} ("Live", "Loading", "Unloading")."""
    found: Dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts:
            found[parts[0]] = parts[4] if len(parts) > 4 else "Live"
    return found


def parse_kernel_release(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """The kernel release's major and minor: 6.8.0-1015-nvidia -> (6, 8)."""
    match = re.match(r"^\s*(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_nvidia_flavour(text: Optional[str]) -> Optional[str]:
    """/proc/driver/nvidia/version -> "open" or "proprietary" (None: no NVIDIA driver loaded)."""
    if not text:
        return None
    first = text.splitlines()[0]
    return "open" if "Open Kernel Module" in first else "proprietary"


def read_modules(tree: Tree) -> Dict[str, Any]:
    """The modules that matter, loaded or not, from /proc/modules; where /proc/modules cannot be
    read, /sys/module/NAME (present for loaded and built-in modules)."""
    text = tree.read(PROC_MODULES)
    loaded: Optional[Dict[str, str]] = parse_proc_modules(text) if text is not None else None
    source = "/proc/modules"
    if loaded is None and tree.is_dir(SYS_MODULE):
        loaded = {name: "Live" for name in MODULES if tree.is_dir(SYS_MODULE + "/" + name)}
        source = "/sys/module"
    modules: Dict[str, Any] = {}
    for name in MODULES:
        is_loaded = None if loaded is None else name in loaded
        modules[name] = {
            "loaded": is_loaded,
            "version": tree.read("%s/%s/version" % (SYS_MODULE, name)) if is_loaded else None,
        }
    return {"modules": modules, "modules_source": source if loaded is not None else None}


def gpudirect_rdma(
    modules: Mapping[str, Any],
    has_rdma: Optional[bool],
    kernel: Optional[Tuple[int, int]],
    nvidia_flavour: Optional[str],
) -> Dict[str, Any]:
    """Whether a NIC here can read and write GPU memory directly: through a peer-memory module
    (nvidia_peermem, or the older nv_peer_mem) or through dma-buf (Linux 5.12+ and the open NVIDIA
    kernel module). None where it cannot be told (modules unreadable and no dma-buf)."""
    peermem = [name for name in PEERMEM_MODULES if modules.get(name, {}).get("loaded")]
    peermem_known = all(modules.get(name, {}).get("loaded") is not None for name in PEERMEM_MODULES)
    dma_buf: Optional[bool] = None
    if nvidia_flavour is None:
        dma_buf = False
    elif kernel is not None:
        dma_buf = kernel >= DMABUF_KERNEL and nvidia_flavour == "open"
    result: Dict[str, Any] = {
        "possible": None,
        "via": None,
        "peermem_loaded": peermem[0] if peermem else (False if peermem_known else None),
        "dma_buf": dma_buf,
        "why": "",
    }
    kernel_text = "%d.%d" % kernel if kernel else "unknown"
    if has_rdma is None:
        result["why"] = "the RDMA devices could not be read"
    elif not has_rdma:
        result.update(possible=False, why="no RDMA device")
    elif nvidia_flavour is None:
        result.update(possible=False, why="no NVIDIA kernel module loaded")
    elif peermem:
        result.update(possible=True, via=peermem[0], why="%s is loaded" % peermem[0])
    elif dma_buf:
        result.update(
            possible=True,
            via="dma-buf",
            why="Linux %s and the open NVIDIA kernel module: dma-buf" % kernel_text,
        )
    elif peermem_known and dma_buf is False:
        result.update(
            possible=False,
            why="nvidia_peermem is not loaded, and dma-buf needs Linux 5.12+ with the open NVIDIA"
            " kernel module (here: Linux %s, %s module)" % (kernel_text, nvidia_flavour),
        )
    else:
        result["why"] = "the loaded modules could not be read, and dma-buf is not available"
    return result


def host_gpudirect_rdma(
    tree: Tree, modules: Mapping[str, Any], devices: Optional[Mapping[str, Any]]
) -> Dict[str, Any]:
    """gpudirect_rdma() for the host under `tree`: its kernel release and NVIDIA module read
    there; `devices` None when the RDMA devices could not be read."""
    return gpudirect_rdma(
        modules,
        None if devices is None else bool(devices),
        parse_kernel_release(tree.read(PROC_OSRELEASE)),
        parse_nvidia_flavour(tree.read(PROC_NVIDIA_VERSION)),
    )
