"""The orchestrator's ``clock`` stamps snapshots and task updates (no sleeping in tests)."""

from __future__ import annotations

from datetime import UTC, datetime

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.checkpoint import Checkpoint
from oma_actors.llm import LLMResponse, ScriptedAdapter, TextBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FakeClock

MOMENT = datetime(2031, 5, 4, 3, 2, 1, 123000, tzinfo=UTC)


async def test_snapshots_and_task_updates_read_the_injected_clock() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter([LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))])
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    result = await OpenMultiAgent(clock=FakeClock(MOMENT)).run_tasks(
        team,
        [Task("only", "do it", assignee="worker")],
        checkpoint=CheckpointOptions(store=store, run_id="clocked"),
    )
    assert [(task.created_at, task.updated_at) for task in result.tasks] == [(MOMENT, MOMENT)]
    stored = await Checkpoint(store, run_id="clocked").load_latest()
    assert stored is not None
    assert stored.created_at == "2031-05-04T03:02:01.123Z"
