"""Fake GPU stacks for loopback hosts: sshd's SetEnv gives a host a fake `nvidia-smi` replaying a
real capture (tests/probes/golden/gpu/…), a stub `torch` (tests/fakes/stubs/…) and a secret canary
that must never leave it."""

from __future__ import annotations

from tests.paths import FAKES, ROOT

GOLDEN_GPU = ROOT / "tests" / "probes" / "golden" / "gpu"
CANARY = "hf_CANARY" + "Zq" * 16


def host_env(capture: str, stub: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        "PATH": f"{FAKES / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "FLEET_FAKE_GPU_DIR": str(GOLDEN_GPU / capture),
        "PYTHONPATH": str(FAKES / "stubs" / stub),
        "HF_TOKEN": CANARY,
        **extra,
    }
