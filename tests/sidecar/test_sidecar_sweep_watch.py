"""Journal watches (helper's mutation sweep): a fork's start is no gap; live notices only.

A journal watch gets the sidecar's own notices live (seq 0), never the progress events the journal
holds already (they would come twice). And:

A child's journal numbers its events above its fork point, so its first event's seq is well
above 1: before the first event read, a higher seq is no loss (``sidecar.journal_watch``), and a
watch from ``after_seq=0`` must neither report a gap nor, without ``allow_gap``, fail.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sidecar_helpers import LOOKUP_SCHEMA, run_request
from test_sidecar_history import fork, history
from test_sidecar_journal import echo_run, run_to_end, serving

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTool, HostTools, SidecarClient
from sidecar.events import RUN_STATUS
from sidecar.journal_watch import NOTICES

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


async def test_a_forked_runs_journal_from_the_start_has_no_gap(tmp_path: Path) -> None:
    async with serving(f"file://{tmp_path / 'state.json'}") as client:
        await run_to_end(client, echo_run("parent"))
        at = (await history(client, "parent"))[1].seq
        await fork(client, "parent", at, "child")
        await client.restore_run("child")
        strict = client.watch("child", journal=True, allow_gap=False)
        events = await asyncio.wait_for(_all(strict), 15)
        assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
        assert next(event for event in events if event.seq).seq > 1  # above the fork point
        lenient = await asyncio.wait_for(_all(client.watch("child", journal=True)), 15)
        assert [event.type for event in lenient if event.type == "gap"] == []


async def _all(events: AsyncIterator[pb.RunEvent]) -> list[pb.RunEvent]:
    return [event async for event in events]


async def test_a_journal_watch_gets_only_the_sidecars_notices_live(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def held(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        await release.wait()
        return "found"

    tool = HostTool(name="lookup", description="x", input_schema=LOOKUP_SCHEMA, handler=held)
    async with serving(f"file://{tmp_path / 'state.json'}") as client:
        host = HostTools(client, "h", [tool])
        serving_host = asyncio.create_task(host.run())
        try:
            await asyncio.wait_for(host.registered.wait(), 10)
            request = run_request("live", task_ids=("t1",))
            await client.start_run(request)
            events = await asyncio.wait_for(_released_on_first(client, release), 15)
        finally:
            host.stop()
            serving_host.cancel()
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    live = {event.type for event in events if event.seq == 0}
    assert RUN_STATUS in live
    assert live <= NOTICES  # progress events the journal holds are not sent twice


async def _released_on_first(client: SidecarClient, release: asyncio.Event) -> list[pb.RunEvent]:
    """The journal watch of run ``live``; ``release`` set once it has sent its first event (it
    is open: what the run logs from then on is live)."""
    events: list[pb.RunEvent] = []
    async for event in client.watch("live", journal=True):
        events.append(event)
        release.set()
    return events
