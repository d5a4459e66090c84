"""What a fresh run does when its checkpoint key already holds a run (decision D12).

OMA overwrites silently: a second ``runTasks`` on the same key starts over at attempt 1 and the
first run's progress is gone. We refuse unless told: ``on_existing="error"`` (the default) raises
``RunExistsError`` before any work, ``"overwrite"`` replaces the stored run, ``"restore"``
continues it. A finished run (every task completed, or every task terminal) is simply replaced:
nothing of it would be continued.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.errors import ConfigurationError, RunExistsError
from oma_actors.orchestration.live import refuse_if_live

if TYPE_CHECKING:
    from oma_actors.orchestration.options import ResolvedCheckpoint

OnExisting = Literal["error", "overwrite", "restore"]


def check_on_existing(value: object) -> OnExisting:
    """``value`` if it is one of ``error``, ``overwrite``, ``restore``; else ConfigurationError."""
    if value not in get_args(OnExisting):
        raise ConfigurationError(
            f"on_existing must be one of 'error', 'overwrite', 'restore', not {value!r}"
        )
    return value  # type: ignore[return-value]


async def continue_existing(resolved: ResolvedCheckpoint | None, on_existing: OnExisting) -> bool:
    """Whether the call should restore the stored run instead of starting a fresh one.

    Raises:
        ConfigurationError: a live run of this process uses the key (decision D9).
        RunExistsError: the key holds an unfinished run and ``on_existing`` is ``"error"``.
        CheckpointError: the stored value is invalid (never treated as "no run").
    """
    if resolved is None:
        return False
    refuse_if_live(resolved.store, resolved.key)
    if on_existing == "overwrite":
        return False
    checkpoint = Checkpoint(resolved.store, key=resolved.key, run_id=resolved.run_id)
    snapshot = await checkpoint.load_latest()
    if snapshot is None or not snapshot.is_unfinished:
        return False
    if on_existing == "restore":
        return True
    raise RunExistsError(resolved.key, snapshot.run_id, snapshot.status)
