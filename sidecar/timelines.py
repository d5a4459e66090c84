"""``GetRunTimeline``: a run's timeline, built from its checkpoint, as text, HTML and JSON.

The run's checkpoint store and key are the ones its record names (the store it was started
with, its explicit key or the default one), so a run executing in a sibling sidecar on a shared
store is shown too. A run that keeps a journal (``sidecar.journals``) is drawn from it, as ``oma
runs show --journal`` draws one: the journal tells which attempt did what, and its tail is folded
into the snapshot as a restore would (with journal-first saves the snapshot is only the last
compaction point). A run without one shows what the snapshot holds. Building and rendering run
in a worker thread: a long run's page must not stall the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from typing import TYPE_CHECKING

from oma_actors.checkpoint import Checkpoint, fold_tail, tail_read_from
from oma_actors.timeline import build_timeline, render_timeline_html, render_timeline_text
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.status import FailedPrecondition, InvalidArgument

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.checkpoint import CheckpointSnapshot
    from oma_actors.journal import JournalEvent
    from oma_actors.runs import RunRecord, RunStore
    from oma_actors.timeline import Timeline
    from sidecar.journals import RunJournals
    from sidecar.record import RunRecordV1
    from sidecar.runs import RunRegistry
    from sidecar.stores import StoreRegistry

DEFAULT_WIDTH = 80
MIN_WIDTH = 60  # the text renderer stays readable from here on
MAX_WIDTH = 400
NO_CHECKPOINT = "NO_CHECKPOINT"


class RunTimelines:
    """Answers ``GetRunTimeline`` from the run registry and the runs' checkpoint stores.

    Args:
        registry: the run records (which store and key each run checkpoints to).
        stores: opens a run's checkpoint store.
        journals: where runs keep their journals (``None``: timelines from snapshots alone).
    """

    def __init__(
        self,
        *,
        registry: RunRegistry,
        stores: StoreRegistry,
        journals: RunJournals | None = None,
        run_store: RunStore | None = None,
    ) -> None:
        self._registry = registry
        self._stores = stores
        self._journals = journals
        self._run_store = run_store

    async def get(self, request: pb.GetRunTimelineRequest) -> pb.GetRunTimelineResponse:
        """The timeline of ``request.run_id`` in its three forms.

        Raises:
            InvalidArgument: a malformed run id, or a width outside 60..400.
            UnknownRunError: no such run (NOT_FOUND/RUN_NOT_FOUND).
            FailedPrecondition: the run has saved no checkpoint (yet), or saves none.
            DataLoss: the run's journal has a damaged line (reason ``JOURNAL_CORRUPT``).
        """
        convert.check_run_id(request.run_id)
        width = request.width or DEFAULT_WIDTH
        if not MIN_WIDTH <= width <= MAX_WIDTH:
            raise InvalidArgument("width", f"must be 0 (for {DEFAULT_WIDTH}) or 60..400")
        record = await self._registry.get(request.run_id)
        snapshot = await self._snapshot(record)
        events = None
        if self._journals is not None:
            events = await self._journals.events(record.run_id, record.store_uri)
            parent = snapshot.forked_from
            if parent is not None:
                # A fork's approval rows show the parent's request and decision times.
                inherited = await self._journals.events(parent.run_id, record.store_uri)
                events = [*(inherited or ()), *(events or ())]
        # The run record tells a cancel no attempt was running for (no run/end says it then).
        fate = None if self._run_store is None else await self._run_store.get(record.run_id)
        return await asyncio.to_thread(_render, snapshot, events, width, fate)

    async def _snapshot(self, record: RunRecordV1) -> CheckpointSnapshot:
        run_id = record.run_id
        options = record.request.checkpoint
        if options.disabled:
            raise FailedPrecondition(NO_CHECKPOINT, f"run {run_id!r} saves no checkpoints")
        store = await self._stores.get(record.store_uri)
        snapshot = await Checkpoint(store, run_id=run_id, key=options.key or None).load_latest()
        if snapshot is None:
            raise FailedPrecondition(NO_CHECKPOINT, f"run {run_id!r} has no checkpoint yet")
        return snapshot


def _render(
    snapshot: CheckpointSnapshot,
    events: Sequence[JournalEvent] | None,
    width: int,
    record: RunRecord | None = None,
) -> pb.GetRunTimelineResponse:
    if events:
        # Where the run stands: the snapshot with the tail a restore would fold (a tail that
        # fails a fold check leaves the snapshot as it is).
        start = tail_read_from(snapshot)
        mine = [e for e in events if e.seq >= start and e.run_id == snapshot.run_id]
        snapshot = fold_tail(snapshot, mine).snapshot
    timeline = build_timeline(snapshot, events, record=record)
    return pb.GetRunTimelineResponse(
        text=timeline_text(timeline, width),
        html=render_timeline_html(timeline),
        timeline_json=timeline_json(timeline),
    )


def timeline_text(timeline: Timeline, width: int) -> str:
    """The terminal rendering as plain text (no colour codes) wrapped at ``width`` columns."""
    from rich.console import Console  # drawn on request only, like the CLI's (P6)

    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width, color_system=None, force_terminal=False, highlight=False
    )
    console.print(render_timeline_text(timeline))
    return buffer.getvalue()


def timeline_json(timeline: Timeline) -> str:
    """The timeline as JSON: its dataclass fields by name, tuples as lists, ``None`` as null."""
    return json.dumps(dataclasses.asdict(timeline), ensure_ascii=False, separators=(",", ":"))
