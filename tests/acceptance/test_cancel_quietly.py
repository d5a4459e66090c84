"""Cancelling a run is not a failure: nothing logs one, and the cancellation propagates.

A tool that catches the cancellation and returns an error result (many HTTP clients do) let
its runner finish after the run had stopped; telling the stopped run raised, and the runner
logged ``actor ... stopped after a failure`` with a traceback for a plain abort.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from acceptance_helpers import answer, calls
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    ToolResult,
    define_tool,
)
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


class Args(BaseModel):
    label: str


async def test_a_tool_that_swallows_the_cancel_leaves_no_failure_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = asyncio.Event()

    async def execute(args: Args, ctx: Any) -> Any:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return ToolResult("aborted", is_error=True)  # swallowed, as many clients do
        return "never"

    tool = define_tool(name="effect", description="d", input_model=Args, execute=execute)
    adapter = ScriptedAdapter([calls(("c1", "effect", {"label": "A"})), answer("unused")])
    team = Team("t", [AgentConfig("w", adapter=adapter, tools=[tool])])
    checkpoint = CheckpointOptions(store=InMemoryStore(), run_id="r")
    caplog.set_level(logging.WARNING, logger="oma_actors")
    run = asyncio.ensure_future(
        OpenMultiAgent().run_tasks(team, [Task("a", "x", assignee="w")], checkpoint=checkpoint)
    )
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0.05)  # let every actor wind down
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == []
