"""Checkpoint keys (spec CK-01, CK-02): re-exported from the one reserved-keyspace module."""

from __future__ import annotations

from oma_actors.keyspace import (
    CHECKPOINT_KEY_PREFIX,
    DEFAULT_CHECKPOINT_KEY,
    checkpoint_key,
    is_checkpoint_key,
)

__all__ = ["CHECKPOINT_KEY_PREFIX", "DEFAULT_CHECKPOINT_KEY", "checkpoint_key", "is_checkpoint_key"]
