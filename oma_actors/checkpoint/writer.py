"""The ``CheckpointActor``: the actor-side shell of a run's ``RunWriter``.

The RunActor asks it to save at each boundary (``Save``: the run, its whole snapshot built
only if the writer writes one); it forwards to the writer, which owns the revision, the outcome
classification, strictness and the events (``run_writer.py``). Being an actor gives the run's
saves a mailbox: boundaries queue in the order they were reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, assert_never

from oma_actors.actors import Actor
from oma_actors.checkpoint.run_writer import (
    RunWriter,
    SaveOutcome,
)

if TYPE_CHECKING:
    from oma_actors.checkpoint.at_boundary import RunAtBoundary
    from oma_actors.checkpoint.boundaries import Boundary

__all__ = ["CheckpointActor", "CheckpointMessage", "Save"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Save:
    """Save ``run`` as the boundary ``boundary``; the reply is a ``SaveOutcome``.

    The writer builds the run's whole snapshot only when it writes one: a journal-only save
    (D10) appends the boundary's events and builds none (issue 19).

    Attributes:
        run: the run at the boundary.
        boundary: the boundary's name (it decides strictness).
        task_id: the task whose state the boundary records, if any.
        committed: tool-call ids whose commit records the save makes durable.
    """

    run: RunAtBoundary
    boundary: Boundary
    task_id: str | None = None
    committed: tuple[str, ...] = ()


CheckpointMessage = Save


class CheckpointActor(Actor[CheckpointMessage, SaveOutcome]):
    """Serializes one run's saves through its ``RunWriter``."""

    def __init__(self, writer: RunWriter) -> None:
        self._writer = writer

    @property
    def revision(self) -> int:
        """Successful saves so far (continuing the restored snapshot's count)."""
        return self._writer.revision

    async def receive(self, message: CheckpointMessage) -> SaveOutcome:
        """Save through the writer and reply with the outcome."""
        match message:
            case Save(run=run, boundary=boundary, task_id=task_id, committed=committed):
                return await self._writer.save_run(
                    run, boundary=boundary, task_id=task_id, committed=committed
                )
            case _:
                assert_never(message)
