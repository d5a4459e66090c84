"""OMA's ``reasoning`` blocks carried through a run: saved, journaled and re-sent after a restore.

A model's thinking (``ReasoningBlock``, OMA's ``{"type": "reasoning", "text", "signature"?}``) is
part of the assistant message: a snapshot holds it, a journal's ``assistant/message`` holds it,
and a restore, from the snapshot alone or folding the journal's tail, gives the model the same
conversation, thinking and signature included.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from acceptance_helpers import answer, run_until
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.checkpoint import checkpoint_key
from oma_actors.events import CheckpointSaved, ProgressEvent
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal, verify_run
from oma_actors.llm import ChatOptions, LLMResponse, Message, ReasoningBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "run-reasoning"
THOUGHT = ReasoningBlock("The user wants x; look it up first.", signature="sig-Eq1")
THOUGHT_JSON = {"type": "reasoning", "text": THOUGHT.text, "signature": "sig-Eq1"}


class Query(BaseModel):
    q: str


async def _lookup(args: Query, ctx: ToolContext) -> str:
    return f"found {args.q}"


LOOKUP = define_tool(name="lookup", description="look up", input_model=Query, execute=_lookup)


def thinking_model(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Turn 1: thinking and a lookup; turn 2: the answer."""
    if len(messages) == 1:
        call = ToolUseBlock("c1", "lookup", {"q": "x"})
        return LLMResponse([THOUGHT, call], stop_reason="tool_use", usage=TokenUsage(2, 2))
    return answer("the answer")


def after_first_round(event: ProgressEvent) -> bool:
    return isinstance(event, CheckpointSaved) and event.boundary == "tool_results"


async def _interrupted_then_restored(journal: Any | None) -> tuple[ScriptedAdapter, Any]:
    store = InMemoryStore()
    adapter = ScriptedAdapter(thinking_model)
    team = Team("t", [AgentConfig("worker", adapter=adapter, tools=[LOOKUP])])
    options = CheckpointOptions(store=store, run_id=RUN)
    tasks = [Task("research", "look x up", assignee="worker")]

    def start(observe: Callable[[ProgressEvent], None]) -> Any:
        return OpenMultiAgent(on_progress=observe).run_tasks(
            team, tasks, checkpoint=options, journal=journal
        )

    await run_until(start, after_first_round)
    saved = json.loads((await store.get(checkpoint_key(RUN))).value)  # type: ignore[union-attr]
    result = await OpenMultiAgent().restore(team, checkpoint=options, journal=journal)
    assert result.success, result.status
    return adapter, saved


async def test_a_restore_from_the_snapshot_resends_the_thinking() -> None:
    adapter, saved = await _interrupted_then_restored(None)
    [entry] = saved["inFlightTasks"]
    assert entry["conversationMessages"][1]["content"][0] == THOUGHT_JSON
    assert adapter.call_count == 2
    resumed = adapter.calls[1].messages
    assert resumed[1].content[0] == THOUGHT  # thinking and signature, as the model wrote them


async def test_a_restore_folding_the_journal_resends_the_thinking(tmp_path: Any) -> None:
    """Journal-first: the round was saved by the journal alone, so the fold rebuilds it."""
    journal = JsonlRunJournal(tmp_path / "journal.jsonl", flush_interval_ms=0)
    adapter, _ = await _interrupted_then_restored(JournalOptions(journal))
    assert adapter.call_count == 2
    assert adapter.calls[1].messages[1].content[0] == THOUGHT
    events = await journal.read_from(0)
    answers = [e for e in events if e.type == "assistant/message"]
    assert answers[0].data["message"]["content"][0] == THOUGHT_JSON
    assert (await verify_run(journal)).ok


async def test_the_journal_request_hashes_cover_the_thinking() -> None:
    journal = InMemoryRunJournal()
    await _interrupted_then_restored(JournalOptions(journal, durable=False))
    verdict = await verify_run(journal)
    assert verdict.ok, verdict.failures
    requests = [e for e in await journal.read_from(0) if e.type == "llm/request"]
    kinds = [[b["blockType"] for b in r.data["blocks"]] for r in requests]
    assert ["text", "reasoning", "tool_use", "tool_result"] in kinds
