"""``state_at`` of a point a restored attempt reached, folded from an anchor of the attempt
before it: the attempt's admission (its ``run/start``, D14) is folded too, so the state names
the attempt that reached the point, as the snapshot saved there does."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from history_support import Effects, Workspace, comparable, make_team, restore_run, tasks
from note_team import script
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Team,
    ToolContext,
    define_tool,
)
from oma_actors.checkpoint import run_history, state_at
from oma_actors.checkpoint.at_boundary import RunAtBoundary
from oma_actors.checkpoint.run_writer import RunWriter, Saved
from oma_actors.domain.snapshot import CheckpointSnapshot
from oma_actors.journal import JournalOptions
from oma_actors.testing import ScriptedAdapter


class Note(BaseModel):
    text: str


def stalling_team(stalled: asyncio.Event) -> Team:
    """Agent ``w`` scripted as ``make_team``'s (5 turns, 1 call each), whose third call of
    ``note`` never returns."""
    calls: list[str] = []

    async def note(args: Note, ctx: ToolContext) -> str:
        calls.append(ctx.tool_call_id or "")
        if len(calls) == 3:
            stalled.set()
            await asyncio.Event().wait()
        return f"noted {args.text}"

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(script(5, 1)), tools=[tool])])


async def interrupted_then_restored(
    space: Workspace, monkeypatch: pytest.MonkeyPatch
) -> dict[int, CheckpointSnapshot]:
    """Attempt 1 cancelled inside its third tool call; attempt 2 restores it to the end. Every
    saved boundary's snapshot, by watermark."""
    saved: dict[int, CheckpointSnapshot] = {}
    original = RunWriter._save_by_path

    async def capturing(self: RunWriter, run: RunAtBoundary, boundary: Any, revision: int) -> Any:
        outcome, snapshot = await original(self, run, boundary, revision)
        if isinstance(outcome, Saved):
            # A journal-only save built no snapshot: the state the run held there.
            held = snapshot or replace(await run.build(), revision=revision)
            saved[held.journal_watermark_seq or 0] = held
        return outcome, snapshot

    monkeypatch.setattr(RunWriter, "_save_by_path", capturing)
    stalled = asyncio.Event()
    journal = space.journal()
    try:
        run = asyncio.ensure_future(
            OpenMultiAgent().run_tasks(
                stalling_team(stalled),
                tasks(1),
                checkpoint=CheckpointOptions(store=space.store(), run_id="r1"),
                journal=JournalOptions(journal, durable=True),
            )
        )
        await asyncio.wait_for(stalled.wait(), 10)
        run.cancel()  # stands for the process dying inside the call
        with pytest.raises(asyncio.CancelledError):
            await run
    finally:
        await journal.close()
    result = await restore_run(space, make_team(5, 1, "idempotent", Effects(), agents=("w",)), "r1")
    assert result.success
    return saved


async def test_a_point_of_a_restored_attempt_names_that_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = Workspace(tmp_path)
    saved = await interrupted_then_restored(space, monkeypatch)
    points = await run_history(space.store(), "r1")
    later = [p for p in points if p.attempt == 2 and p.seq in saved]
    assert later, points
    for point in later:
        state = await state_at(space.store(), "r1", point.seq)
        assert state.attempt == 2, point
        assert comparable(state) == comparable(saved[point.seq]), point
