"""Masks token-shaped secrets. The patterns live in probes/_runner.py, which masks on the host first;
the controller masks again before anything is shown or saved, with the very same list."""

from __future__ import annotations

from typing import Any

from probes._runner import mask_secrets as _mask_on_host
from probes._runner import secret_patterns_in


def mask_secrets(value: Any) -> Any:
    """Any JSON-like value with `hf_…`, `ghp_…`, `AKIA…`, `Bearer …`, `://user:pass@` replaced."""
    return _mask_on_host(value)


def contains_secret(text: str) -> bool:
    """Whether any token-shaped string occurs in `text` (one scan, no copy)."""
    return any(pattern.search(text) for pattern in secret_patterns_in(text))
