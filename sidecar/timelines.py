"""``GetRunTimeline``: a run's timeline, built from its checkpoint, as text, HTML and JSON.

The run's checkpoint store and key are the ones its record names (the store it was started
with, its explicit key or the default one), so a run executing in a sibling sidecar on a shared
store is shown too. Sidecar runs keep no journal, so the timeline shows what the snapshot holds.
Building and rendering run in a worker thread: a long run's page must not stall the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from typing import TYPE_CHECKING

from oma_actors import Checkpoint, build_timeline, render_timeline_html, render_timeline_text
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.status import FailedPrecondition, InvalidArgument

if TYPE_CHECKING:
    from oma_actors import CheckpointSnapshot, Timeline
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
    """

    def __init__(self, *, registry: RunRegistry, stores: StoreRegistry) -> None:
        self._registry = registry
        self._stores = stores

    async def get(self, request: pb.GetRunTimelineRequest) -> pb.GetRunTimelineResponse:
        """The timeline of ``request.run_id`` in its three forms.

        Raises:
            InvalidArgument: a malformed run id, or a width outside 60..400.
            UnknownRunError: no such run (NOT_FOUND/RUN_NOT_FOUND).
            FailedPrecondition: the run has saved no checkpoint (yet), or saves none.
        """
        convert.check_run_id(request.run_id)
        width = request.width or DEFAULT_WIDTH
        if not MIN_WIDTH <= width <= MAX_WIDTH:
            raise InvalidArgument("width", f"must be 0 (for {DEFAULT_WIDTH}) or 60..400")
        snapshot = await self._snapshot(request.run_id)
        return await asyncio.to_thread(_render, snapshot, width)

    async def _snapshot(self, run_id: str) -> CheckpointSnapshot:
        record = await self._registry.get(run_id)
        options = record.request.checkpoint
        if options.disabled:
            raise FailedPrecondition(NO_CHECKPOINT, f"run {run_id!r} saves no checkpoints")
        store = await self._stores.get(record.store_uri)
        snapshot = await Checkpoint(store, run_id=run_id, key=options.key or None).load_latest()
        if snapshot is None:
            raise FailedPrecondition(NO_CHECKPOINT, f"run {run_id!r} has no checkpoint yet")
        return snapshot


def _render(snapshot: CheckpointSnapshot, width: int) -> pb.GetRunTimelineResponse:
    timeline = build_timeline(snapshot)
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
