"""A bug inside a run's own step ends the run with that error instead of leaving it hanging.

A save that raises something other than a refusal (here: the codec, on the third save) stops
the run's actor. Its caller awaited an end that nobody was left to report, so ``run_tasks``
never returned. Now the failure reaches the caller, with and without a run store's lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
)
from oma_actors.checkpoint import codec, run_writer
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock
from oma_actors.runs import MemoryStoreRunStore
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


class CodecBug(RuntimeError):
    pass


def answer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


@pytest.mark.parametrize("leased", [False, True], ids=["no-run-store", "leased"])
async def test_a_save_that_raises_ends_the_run_with_its_error(
    leased: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0
    real_encode = codec.encode

    def failing(snapshot: Any, cache: Any = None) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise CodecBug("a bug in the codec")
        return real_encode(snapshot, cache)

    monkeypatch.setattr(run_writer, "encode", failing)
    store = InMemoryStore()
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(answer))])
    runner = OpenMultiAgent(run_store=MemoryStoreRunStore(store) if leased else None)
    run = runner.run_tasks(
        team, [Task("a", "x", assignee="w")], checkpoint=CheckpointOptions(store=store, run_id="r1")
    )
    with pytest.raises(CodecBug, match="a bug in the codec"):
        # Bounded here only so that a regression fails fast instead of at the suite's timeout.
        await asyncio.wait_for(run, 30)
    assert calls >= 2
