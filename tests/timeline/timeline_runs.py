"""A restored demo-like run for the timeline tests: crashed after a tool commit, then restored.

The demo's research team on the scripted model, with a journal. The run is stopped (its task
cancelled: nothing after that point is saved) once the analyst has written its note, after the
parallel search committed: the search is then replayed on restore and the note re-runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from oma_actors import CheckpointOptions, OpenMultiAgent
from oma_actors.checkpoint import Checkpoint, CheckpointSnapshot
from oma_actors.cli.demo_team import demo_tasks, demo_team
from oma_actors.events import ProgressEvent, ToolCalled
from oma_actors.journal import JournalEvent, JsonlRunJournal
from oma_actors.stores import FileStore

RUN_ID = "demo-run"


async def restored_demo(out: Path) -> tuple[CheckpointSnapshot, list[JournalEvent]]:
    """Crash and restore the demo run under ``out``; its final snapshot and journal events."""
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    committed, stopped = asyncio.Event(), asyncio.Event()

    def observe(event: ProgressEvent) -> None:
        if isinstance(event, ToolCalled) and event.tool_call_id.startswith("call-analyse"):
            committed.set()

    async def after_write(filename: str) -> None:
        if filename == "analysis.md":
            await committed.wait()
            stopped.set()
            await asyncio.Event().wait()  # hold the note's commit until the "crash"

    store = FileStore(out / "state.json")
    journal = JsonlRunJournal(out / "journal.jsonl")
    checkpoint = CheckpointOptions(store=store, run_id=RUN_ID)
    run = asyncio.ensure_future(
        OpenMultiAgent(on_progress=observe, max_concurrency=3).run_tasks(
            demo_team(out, after_write=after_write), demo_tasks(), checkpoint=checkpoint,
            journal=journal,
        )
    )  # fmt: skip
    await asyncio.wait_for(stopped.wait(), 60)
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    await journal.close()
    await store.aclose()

    store = FileStore(out / "state.json")
    journal = JsonlRunJournal(out / "journal.jsonl")
    result = await OpenMultiAgent(max_concurrency=3).restore(
        demo_team(out), checkpoint=CheckpointOptions(store=store, run_id=RUN_ID), journal=journal
    )
    assert result.success
    assert result.attempt == 2
    await journal.close()
    snapshot = await Checkpoint(store, run_id=RUN_ID).load_latest()
    await store.aclose()
    assert snapshot is not None
    events = await JsonlRunJournal(out / "journal.jsonl").read_from(0)
    return snapshot, events
