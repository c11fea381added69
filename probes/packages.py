"""Versions of the Python distributions an inference stack depends on, read without importing them."""

from __future__ import annotations

import sys

DEFAULT_PACKAGES = (
    "torch",
    "triton",
    "flashinfer-python",
    "flashinfer-cubin",
    "sgl-kernel",
    "sglang",
    "vllm",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cudnn-cu12",
    "nvidia-nvshmem-cu12",
    "cuda-python",
    "mscclpp",
    "numpy",
    "transformers",
    "xformers",
)


def distribution_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None; never imports the package."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8 has no importlib.metadata
        return None
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    except Exception as exc:  # a broken METADATA file is a fact worth showing, not a crash
        return "unreadable: %s" % type(exc).__name__


def collect(options: dict) -> dict:
    names = list(options.get("packages") or DEFAULT_PACKAGES) + list(options.get("extra") or [])
    versions = {name: distribution_version(name) for name in names}
    return {"ok": True, "data": {"packages": versions}, "error": None}


if __name__ == "__main__":
    import json

    del sys.path[0]
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
