"""Fake torch 2.11.0+cu130 on 8 RTX PRO 6000 Blackwell (SM120): the H200 stack's torch, on PCIe."""

import importlib.util
import os

SPEC = {
    "version": "2.11.0+cu130",
    "cuda": "13.0",
    "cudnn": 91300,
    "nccl": [2, 28, 9],
    "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
    "devices": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "capability": [12, 0]}]
    * 8,
    "p2p": False,  # PCIe box: no peer access
    "nvshmem": True,
    "public_symmetric_memory": True,
}

_BUILDER = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fake_torch.py")
_spec = importlib.util.spec_from_file_location("_fleet_fake_torch", _BUILDER)
_builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_builder)
_builder.install(globals(), SPEC)
