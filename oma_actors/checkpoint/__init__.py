"""Checkpoints: the typed snapshot, its OMA-compatible codec, keys, and the writer actor."""

from oma_actors.checkpoint.codec import decode, encode
from oma_actors.checkpoint.keys import (
    CHECKPOINT_KEY_PREFIX,
    DEFAULT_CHECKPOINT_KEY,
    checkpoint_key,
    is_checkpoint_key,
)
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.snapshot import (
    CheckpointSnapshot,
    CompletedTask,
    InFlightTask,
    RunIdentity,
    RunMode,
)
from oma_actors.checkpoint.writer import (
    CheckpointActor,
    NotSaved,
    Save,
    Saved,
    SaveOutcome,
    Unknown,
)

__all__ = [
    "CHECKPOINT_KEY_PREFIX",
    "DEFAULT_CHECKPOINT_KEY",
    "Checkpoint",
    "CheckpointActor",
    "CheckpointSnapshot",
    "CompletedTask",
    "InFlightTask",
    "NotSaved",
    "RunIdentity",
    "RunMode",
    "Save",
    "SaveOutcome",
    "Saved",
    "Unknown",
    "checkpoint_key",
    "decode",
    "encode",
    "is_checkpoint_key",
]
