"""Masks token-shaped secrets. The patterns live in probes/runner/_runner_secrets.py, with which the host runner
masks on the host first; the controller masks again before anything is shown or saved, with the very
same list."""

from __future__ import annotations

from typing import Any

from fleet.shipped import host_secrets

_HOST = host_secrets()
ENV_SECRETS: tuple[str, ...] = tuple(_HOST.ENV_SECRETS)
secret_patterns_in = _HOST.secret_patterns_in
_mask_on_host = _HOST.mask_secrets


def mask_secrets(value: Any) -> Any:
    """Any JSON-like value with `hf_…`, `ghp_…`, `AKIA…`, `Bearer …`, `://user:pass@` replaced."""
    return _mask_on_host(value)


def might_hold_secret(text: str) -> bool:
    """Whether `text` (e.g. a whole JSON document) may hold something mask_secrets would change:
    a pattern's anchor or a secret-named variable's value occurs in it. A substring scan, so the
    callers can skip the slow walk of mask_secrets over data that is clean (nearly all of it)."""
    return bool(secret_patterns_in(text)) or any(secret in text for secret in ENV_SECRETS)
