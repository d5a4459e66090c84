"""The ``CheckpointActor``: one per run, writes snapshots strictly in order (decision D2).

Every save answers with an outcome instead of raising: ``Saved(revision)``, ``NotSaved(error)``
when nothing reached the store (the snapshot could not be encoded), or ``Unknown(error)`` when the
store failed mid-write and may or may not hold the new value. Callers at strict boundaries treat
anything but ``Saved`` as failure; best-effort boundaries report it and go on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from oma_actors.actors import Actor
from oma_actors.checkpoint.codec import encode
from oma_actors.checkpoint.fragments import EncodeCache
from oma_actors.errors import CheckpointError
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed, ProgressEvent

if TYPE_CHECKING:
    from collections.abc import Callable

    from oma_actors.checkpoint.manager import Checkpoint
    from oma_actors.checkpoint.snapshot import CheckpointSnapshot

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Saved:
    """The snapshot is durable; ``revision`` counts this run's successful saves."""

    revision: int


@dataclass(frozen=True, slots=True)
class NotSaved:
    """Nothing was written (e.g. the snapshot could not be serialized)."""

    error: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """The store failed during the write; the new value may or may not be stored."""

    error: str


SaveOutcome = Saved | NotSaved | Unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class Save:
    """Write ``snapshot``; the reply is a ``SaveOutcome``."""

    snapshot: CheckpointSnapshot
    strict: bool = False


CheckpointMessage = Save


class CheckpointActor(Actor[CheckpointMessage]):
    """Owns the write order of one checkpoint key and the run's save revision."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        *,
        emit: Callable[[ProgressEvent], None],
        revision: int = 0,
    ) -> None:
        self._checkpoint = checkpoint
        self._emit = emit
        self._revision = revision
        self._cache = EncodeCache()

    @property
    def revision(self) -> int:
        """Successful saves so far (continuing the restored snapshot's count)."""
        return self._revision

    async def receive(self, message: CheckpointMessage) -> SaveOutcome:
        """Write the snapshot stamped with the next revision."""
        snapshot = replace(message.snapshot, revision=self._revision + 1)
        run_id = snapshot.run_id
        try:
            text = encode(snapshot, self._cache)
        except CheckpointError as exc:
            self._emit(CheckpointSaveFailed(run_id=run_id, error=str(exc)))
            return NotSaved(str(exc))
        try:
            await self._checkpoint.write_encoded(text, snapshot)
        except Exception as exc:  # any store failure is an outcome, never a crash of the run
            # No read-back to "confirm" the write: a store may serve reads from a cache that
            # already holds the value its failed flush never made durable (FileStore, FS-08).
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("checkpoint save failed: %s", error)
            self._emit(CheckpointSaveFailed(run_id=run_id, error=error))
            return Unknown(error)
        self._revision = snapshot.revision
        self._emit(CheckpointSaved(run_id=run_id, revision=self._revision))
        return Saved(self._revision)
