"""``RunAtBoundary``: what a save reads of a run, with its whole snapshot built only on demand.

A journal-first save (D10) of a per-turn boundary is the append of the boundary's events: it
needs the run id, the journal watermark the boundary's facts were recorded through and, at a
``tool_dispatch``, the calls in flight (their dispatch marks, issue 18). Only a compaction, or a
writer with no journal, writes the whole snapshot. Building one costs O(run state) (every task,
entry and completed result copied into frozen values, a timestamp formatted), about 200 us
of CPU at small state, so the writer asks for it (``build``) only when it writes it (issue 19).

Nothing here is a copy of the run: ``in_flight`` is the run actor's own map of runner states,
read while the actor waits for the save's outcome (it handles one message at a time, so the map
does not change under the writer), and ``build`` reads the same live state when the writer needs
the snapshot, stamped with the watermark taken at the boundary (the seq the writer took the
boundary's events through), as the snapshot the actor used to build before queueing the save.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Mapping

    from oma_actors.domain.inflight import RunnerState
    from oma_actors.domain.snapshot import CheckpointSnapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class RunAtBoundary:
    """The run at one durable boundary, as its writer reads it.

    Attributes:
        run_id: the run's id.
        watermark: the journal seq the boundary's facts were recorded through (the watermark
            its snapshot would carry); ``None`` for a run without a journal.
        in_flight: task id -> (agent, runner state) of every task in flight: the run's own map.
        build: builds the whole snapshot of the run at this boundary, at ``watermark``
            (its revision is the writer's to stamp).
    """

    run_id: str
    watermark: int | None
    in_flight: Mapping[str, tuple[str, RunnerState]]
    build: Callable[[], Awaitable[CheckpointSnapshot]]

    @classmethod
    def of(cls, snapshot: CheckpointSnapshot) -> RunAtBoundary:
        """A boundary whose snapshot is already built (a flow's save, a test)."""

        async def built() -> CheckpointSnapshot:
            return snapshot

        return cls(
            run_id=snapshot.run_id,
            watermark=snapshot.journal_watermark_seq,
            in_flight={e.task_id: (e.assignee, e.state) for e in snapshot.in_flight},
            build=built,
        )

    def dispatched_uncommitted(self) -> Iterator[tuple[str, str, str]]:
        """(task id, agent, call id) of each call dispatched and not committed, in order."""
        for task_id, (agent, state) in self.in_flight.items():
            for item in state.pending:
                if item.dispatched and item.commit is None:
                    yield task_id, agent, item.call.id
