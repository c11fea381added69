"""Fake torch 2.6.0+cu124 on 8 RTX PRO 6000 Blackwell (SM120): one upgrade behind, no sm_120 in its
arch list (it cannot run kernels there) and only the private `_SymmetricMemory`."""

import importlib.util
import os

SPEC = {
    "version": "2.6.0+cu124",
    "cuda": "12.4",
    "cudnn": 90100,
    "nccl": [2, 21, 5],
    "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
    "devices": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "capability": [12, 0]}]
    * 8,
    "p2p": False,  # PCIe box: no peer access
    "nvshmem": False,
    "public_symmetric_memory": False,  # only _SymmetricMemory
}

_BUILDER = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fake_torch.py")
_spec = importlib.util.spec_from_file_location("_fleet_fake_torch", _BUILDER)
_builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_builder)
_builder.install(globals(), SPEC)
