"""Checkpoints: the typed snapshot, its OMA-compatible codec, keys, and the run's one writer."""

from oma_actors.checkpoint.anchors import history_keys
from oma_actors.checkpoint.codec import decode, encode
from oma_actors.checkpoint.fork import ForkInfo, fork_run
from oma_actors.checkpoint.history import HistoryPoint, run_history, state_at
from oma_actors.checkpoint.journal_path import mark_started_unsafe
from oma_actors.checkpoint.listing import CheckpointSummary, list_checkpoints
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.checkpoint.run_writer import NotSaved, RunWriter, Saved, SaveOutcome, Unknown
from oma_actors.checkpoint.writer import CheckpointActor, Save
from oma_actors.domain.snapshot import (
    CheckpointSnapshot,
    CompletedTask,
    InFlightTask,
    RunIdentity,
    RunMode,
)
from oma_actors.journal.fold import Discarded, Folded, FoldResult, fold_tail, tail_read_from
from oma_actors.journal.tail import read_journal_tail
from oma_actors.keyspace import (
    CHECKPOINT_KEY_PREFIX,
    DEFAULT_CHECKPOINT_KEY,
    checkpoint_key,
    is_checkpoint_key,
)

__all__ = [
    "CHECKPOINT_KEY_PREFIX",
    "Checkpoint",
    "CheckpointActor",
    "CheckpointSnapshot",
    "CheckpointSummary",
    "CompletedTask",
    "DEFAULT_CHECKPOINT_KEY",
    "Discarded",
    "FoldResult",
    "Folded",
    "ForkInfo",
    "HistoryPoint",
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
    "fold_tail",
    "fork_run",
    "history_keys",
    "is_checkpoint_key",
    "list_checkpoints",
    "mark_started_unsafe",
    "read_journal_tail",
    "run_history",
    "state_at",
    "tail_read_from",
]
