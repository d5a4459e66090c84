"""A run logs its progress at INFO, so ``oma serve -v`` shows what runs are doing."""

from __future__ import annotations

import logging

import pytest

from oma_actors import AgentConfig, CheckpointOptions, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.runs import MemoryStoreRunStore
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


async def test_a_run_logs_its_lease_tasks_and_end_at_info(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter([LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))])
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    with caplog.at_level(logging.INFO, logger="oma_actors"):
        await OpenMultiAgent(run_store=MemoryStoreRunStore(store)).run_tasks(
            team, [Task("Research", "x", assignee="worker")],
            checkpoint=CheckpointOptions(store=store, run_id="logged"),
        )  # fmt: skip
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(line.startswith("run logged: lease acquired by ") for line in lines)
    assert "run logged: task 'Research' started on worker" in lines
    assert "run logged: task 'Research' completed (1 turns)" in lines
    assert "run logged: finished (checkpoint revision 3)" in lines
    # No on_progress was given: no event is handed to one (nor logged as its failure).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
