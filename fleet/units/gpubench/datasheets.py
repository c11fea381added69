"""What the vendor says a GPU can do, for gpubench's `% of datasheet`: dense BF16 TFLOPS, memory
GB/s, NVLink GB/s per direction and the PCIe link, per GPU model, each with its source. Pure.

Dense means without 2:4 sparsity (NVIDIA's tables give the sparse figure, marked *, for data
centre parts: dense is half). BF16 is with FP32 accumulation (what torch's BF16 matmul does): on
GeForce cards that is half the FP16-accumulate rate. FP16 runs at the BF16 rate on all of these.
NVLink per direction is half the "GB/s bidirectional" the datasheets quote. The peak figures are
the vendor's boost-clock ones; real matmuls reach 60–80% of them (the 2×H200 host: 673 of 989).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Datasheet:
    model: str
    bf16_tflops: float  # dense, FP32 accumulate
    memory_gbps: float
    nvlink_gbps: float | None  # per direction; None: no NVLink
    pcie_gen: int
    pcie_lanes: int
    source: str

    @property
    def pcie_gbps(self) -> float:
        """The PCIe link's rate per direction after line encoding."""
        return pcie_gbps(self.pcie_gen, self.pcie_lanes)


# PCIe: transfer rate per lane (GT/s) and the share left after line encoding (Gen6: FLIT mode).
PCIE_GT_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


def pcie_gbps(gen: int, lanes: int) -> float:
    """GB/s per direction of a Gen `gen` x`lanes` link (Gen5 x16: 63.0)."""
    return PCIE_GT_S.get(gen, 0.0) * lanes * PCIE_ENCODING.get(gen, 1.0) / 8


H100_PAGE = "https://www.nvidia.com/en-us/data-center/h100/ (H100 datasheet table)"
H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/ (H200 datasheet table)"
HGX_PAGE = (
    "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200 / B300 specifications: FP16/BF16 "
    "36 PFLOPS sparse for 8 GPUs; NVLink 1.8 TB/s per GPU); PCIe Gen6: "
    "https://glennklockwood.com/garden/processors/B200"
)
A100_PAGE = "https://www.nvidia.com/en-us/data-center/a100/ (A100 datasheet table)"
RTX_BLACKWELL = (
    "NVIDIA RTX Blackwell GPU Architecture whitepaper, appendix (FP16/BF16 tensor, FP32 "
    "accumulate, dense): https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/"
    "nvidia-rtx-blackwell-gpu-architecture.pdf"
)

# First match wins: the more specific names (NVL, PCIe, 80GB) come before the family's.
DATASHEETS: tuple[tuple[str, Datasheet], ...] = (
    (r"\bh200 nvl", Datasheet("H200 NVL", 835.5, 4800, 450, 5, 16, H200_PAGE)),
    (r"\bh200", Datasheet("H200 SXM", 989.5, 4800, 450, 5, 16, H200_PAGE)),
    (r"\bh100 nvl", Datasheet("H100 NVL", 835.5, 3900, 300, 5, 16, H100_PAGE)),
    (r"\bh100.*pcie", Datasheet("H100 PCIe", 756.5, 2000, 300, 5, 16, H100_PAGE)),
    (r"\bh100", Datasheet("H100 SXM", 989.5, 3350, 450, 5, 16, H100_PAGE)),
    (r"\bb300", Datasheet("B300 (HGX)", 2250, 8000, 900, 6, 16, HGX_PAGE)),
    (r"\bb200", Datasheet("B200 (HGX)", 2250, 8000, 900, 6, 16, HGX_PAGE)),
    (
        r"\ba100.*pcie.*80|\ba100.*80.*pcie",
        Datasheet("A100 80GB PCIe", 312, 1935, 300, 4, 16, A100_PAGE),
    ),
    (r"\ba100.*80", Datasheet("A100 80GB SXM", 312, 2039, 300, 4, 16, A100_PAGE)),
    (r"\ba100.*pcie", Datasheet("A100 40GB PCIe", 312, 1555, 300, 4, 16, A100_PAGE)),
    (r"\ba100", Datasheet("A100 40GB SXM", 312, 1555, 300, 4, 16, A100_PAGE)),
    (
        r"\bl40s",
        Datasheet(
            "L40S", 362.05, 864, None, 4, 16, "https://www.nvidia.com/en-us/data-center/l40s/"
        ),
    ),
    (
        r"rtx pro 6000 blackwell(?!.*max q)",
        Datasheet(
            "RTX PRO 6000 Blackwell",
            503.8,
            1792,
            None,
            5,
            16,
            RTX_BLACKWELL + "; https://www.nvidia.com/en-us/products/workstations/"
            "professional-desktop-gpus/rtx-pro-6000/",
        ),
    ),
    (r"rtx 5090(?!.*laptop)", Datasheet("RTX 5090", 209.5, 1792, None, 5, 16, RTX_BLACKWELL)),
    (
        r"rtx 4090(?!.*laptop)",
        Datasheet(
            "RTX 4090",
            165.2,
            1008,
            None,
            4,
            16,
            "NVIDIA Ada GPU Architecture whitepaper, appendix A (FP16 tensor with FP32 "
            "accumulate, dense): https://images.nvidia.com/aem-dam/Solutions/geforce/ada/"
            "nvidia-ada-gpu-architecture.pdf",
        ),
    ),
)


def datasheet_for(name: object) -> Datasheet | None:
    """The datasheet of a GPU by the name torch or nvidia-smi gives it ('NVIDIA H200',
    'NVIDIA A100-SXM4-80GB', 'NVIDIA GeForce RTX 4090'), or None for a model not in the table
    (and for the RTX PRO 6000 Max-Q, whose clocks are lower)."""
    text = re.sub(r"[-_]", " ", str(name or "")).lower()
    for pattern, sheet in DATASHEETS:
        if re.search(pattern, text):
            return sheet
    return None
