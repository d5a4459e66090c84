"""Checkpoint keys (spec CK-01, CK-02)."""

from __future__ import annotations

CHECKPOINT_KEY_PREFIX = "__oma_checkpoint__/"
DEFAULT_CHECKPOINT_KEY = "__oma_checkpoint__/latest"


def checkpoint_key(run_id: str | None) -> str:
    """``__oma_checkpoint__/<run_id>/latest``, or the default key when ``run_id`` is empty."""
    if not run_id:
        return DEFAULT_CHECKPOINT_KEY
    return f"{CHECKPOINT_KEY_PREFIX}{run_id}/latest"


def is_checkpoint_key(key: str) -> bool:
    """Whether ``key`` lies in the checkpoint namespace."""
    return key.startswith(CHECKPOINT_KEY_PREFIX)
