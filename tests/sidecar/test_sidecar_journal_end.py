"""How a run that did not finish ends its journal: ``CancelRun`` and a stopping sidecar.

Every exit path writes ``run/end`` (OMA's rule); a cancel used to write none, so a journal
watcher learnt of it only from the sidecar's own notice, and a journal read elsewhere did not
show it. ``CancelRun``'s reason is the ``run/end``'s message and the event reads CANCELLED; a
sidecar that stops cancels its runs with ``STOPPING``, whose ``run/end`` reads INTERRUPTED: the
run is adopted from its checkpoint, nobody cancelled it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sidecar_helpers import lookup_tool, run_request
from test_sidecar_journal import journal_events, serving
from test_sidecar_journal_watch import journal_of, watch_journal

from oma_actors.journal import JournalEvent
from oma_actors.journal import vocabulary as v
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.attempt import STOPPING
from sidecar.client import HostTools
from sidecar.journal_watch import journal_message

if TYPE_CHECKING:
    from pathlib import Path


def ended(code: str, error: str | None) -> pb.RunEvent:
    data = v.run_ended(status=code, error=error).data
    event = JournalEvent(
        seq=9, type="run/end", run_id="r", attempt=1, timestamp_unix_ms=1, data=data
    )
    return journal_message(event)


def test_an_aborted_end_reads_interrupted_only_when_the_sidecar_stopped() -> None:
    assert ended("aborted", STOPPING).run_status.status == pb.RUN_STATUS_INTERRUPTED
    assert ended("aborted", "operator said so").run_status.status == pb.RUN_STATUS_CANCELLED
    assert ended("aborted", None).run_status.status == pb.RUN_STATUS_CANCELLED


async def blocked_run(
    client: Any, run_id: str, group: asyncio.TaskGroup
) -> tuple[HostTools, asyncio.Task[None]]:
    """Start ``run_id`` with a host ``lookup`` that never answers; return once it was called
    (with the host and its task)."""
    called = asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        called.set()
        await asyncio.Event().wait()
        return "never"

    host = HostTools(client, "blocking-host", [lookup_tool(lookup)])
    hosting = group.create_task(host.run(reconnect_delay=0.05))
    await asyncio.wait_for(host.registered.wait(), 10)
    await client.start_run(run_request(run_id, task_ids=("t1",)))
    await asyncio.wait_for(called.wait(), 10)
    return host, hosting


async def test_cancel_run_ends_the_journal_with_its_reason(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    async with serving(f"file://{state}") as client, asyncio.TaskGroup() as group:
        host, hosting = await blocked_run(client, "je-cancel", group)
        await client.cancel_run("je-cancel", reason="operator said so")
        watched = await asyncio.wait_for(watch_journal(client, "je-cancel"), 20)
        host.stop()
        hosting.cancel()
    last = watched[-1]
    assert last.type == "run/end"
    assert last.run_status.status == pb.RUN_STATUS_CANCELLED
    assert last.run_status.outcome.code == "aborted"
    assert last.run_status.outcome.message == "operator said so"


async def test_a_stopping_sidecar_ends_its_runs_journals_interrupted(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    async with asyncio.TaskGroup() as group:
        async with serving(f"file://{state}") as client:
            host, hosting = await blocked_run(client, "je-stop", group)
        host.stop()
        hosting.cancel()
    events = await journal_events(journal_of(state, "je-stop"))
    assert events[-1].type == "run/end"
    assert events[-1].data == {"status": {"code": "aborted"}, "error": {"message": STOPPING}}
    assert journal_message(events[-1]).run_status.status == pb.RUN_STATUS_INTERRUPTED
