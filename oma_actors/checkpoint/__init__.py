"""Checkpoints: the typed snapshot, its OMA-compatible codec, keys, and the run's one writer."""

from oma_actors.checkpoint.codec import decode, encode
from oma_actors.checkpoint.keys import (
    CHECKPOINT_KEY_PREFIX,
    DEFAULT_CHECKPOINT_KEY,
    checkpoint_key,
    is_checkpoint_key,
)
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.run_writer import NotSaved, RunWriter, Saved, SaveOutcome, Unknown
from oma_actors.checkpoint.snapshot import (
    CheckpointSnapshot,
    CompletedTask,
    InFlightTask,
    RunIdentity,
    RunMode,
)
from oma_actors.checkpoint.writer import CheckpointActor, Save

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
    "RunWriter",
    "Save",
    "SaveOutcome",
    "Saved",
    "Unknown",
    "checkpoint_key",
    "decode",
    "encode",
    "is_checkpoint_key",
]
