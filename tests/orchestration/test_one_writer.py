"""Every durable write of a run goes through its one ``RunWriter`` and names its boundary."""

from __future__ import annotations

import json
from collections.abc import Sequence

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
from oma_actors.checkpoint import Checkpoint
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed, ProgressEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FailingStore, ScriptedAdapter


def answer(text: str) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(1, 1))


PLAN = [{"title": "Research", "description": "find facts", "assignee": "researcher"}]


def synthesis_fails(inner: InMemoryStore) -> FailingStore:
    """Refuses exactly the snapshot writes that carry a synthesis (the disk filled up)."""
    return FailingStore(
        inner,
        times=None,
        predicate=lambda _key, value: isinstance(value, dict) and "synthesisResult" in value,
        exc_factory=lambda: OSError(28, "No space left on device"),
    )


async def test_a_failed_synthesis_save_is_reported_and_the_result_still_returned() -> None:
    inner = InMemoryStore()
    store = synthesis_fails(inner)
    events: list[ProgressEvent] = []
    lead = ScriptedAdapter([answer(json.dumps(PLAN)), answer("final answer")])
    team = Team("t", [AgentConfig("researcher", adapter=ScriptedAdapter([answer("facts")]))])
    result = await OpenMultiAgent(on_progress=events.append).run_team(
        team,
        "explain",
        coordinator=AgentConfig("coordinator", adapter=lead),
        checkpoint=CheckpointOptions(store=store, run_id="syn"),
    )
    assert result.success
    assert result.agent_results["coordinator"].output == "final answer"
    failures = [e for e in events if isinstance(e, CheckpointSaveFailed)]
    assert [(f.boundary, f.strict) for f in failures] == [("synthesis", False)]
    assert "No space left on device" in failures[0].error
    stored = await Checkpoint(inner, run_id="syn").load_latest()
    assert stored is not None
    assert stored.synthesis is None  # nothing half-written; the last durable save stands
    saved = [e.revision for e in events if isinstance(e, CheckpointSaved)]
    assert stored.revision == saved[-1] == len(saved)


async def test_a_stored_synthesis_continues_the_run_s_revisions() -> None:
    store = InMemoryStore()
    events: list[ProgressEvent] = []
    lead = ScriptedAdapter([answer(json.dumps(PLAN)), answer("final answer")])
    team = Team("t", [AgentConfig("researcher", adapter=ScriptedAdapter([answer("facts")]))])
    await OpenMultiAgent(on_progress=events.append).run_team(
        team,
        "explain",
        coordinator=AgentConfig("coordinator", adapter=lead),
        checkpoint=CheckpointOptions(store=store, run_id="syn"),
    )
    saved = [(e.boundary, e.revision) for e in events if isinstance(e, CheckpointSaved)]
    assert saved[0] == ("admission", 1)
    assert saved[-1] == ("synthesis", len(saved))
    assert [revision for _, revision in saved] == list(range(1, len(saved) + 1))
    stored = await Checkpoint(store, run_id="syn").load_latest()
    assert stored is not None
    assert stored.synthesis is not None
    assert stored.revision == len(saved)


class Note(BaseModel):
    text: str


def tool_then_answer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) == 1:
        return LLMResponse(
            [
                ToolUseBlock("call-1", "note", {"text": "a"}),
                ToolUseBlock("call-2", "note", {"text": "b"}),
            ],
            stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


async def test_each_runner_boundary_is_saved_by_name_with_its_task_and_committed_calls() -> None:
    async def note(args: Note, ctx: ToolContext) -> str:
        return args.text

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    team = Team(
        "t", [AgentConfig("worker", adapter=ScriptedAdapter(tool_then_answer), tools=[tool])]
    )
    events: list[ProgressEvent] = []
    task = Task("only", "do it", assignee="worker")
    await OpenMultiAgent(on_progress=events.append).run_tasks(
        team, [task], checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="b")
    )
    saved = [e for e in events if isinstance(e, CheckpointSaved)]
    names = [e.boundary for e in saved]
    assert names[0] == "admission"
    assert names[1] == "assistant_tool_turn"
    assert names.count("tool_commit") == 2
    assert names[-1] == "task_completed"
    assert {e.task_id for e in saved[1:]} == {task.id}
    commits = [e.committed for e in saved if e.boundary == "tool_commit"]
    # Both calls run concurrently; whichever commits second is saved with both commits.
    assert sorted(map(len, commits)) == [1, 2]
    assert set(commits[-1]) == {"call-1", "call-2"}
    assert names.index("tool_results") > max(i for i, n in enumerate(names) if n == "tool_commit")
    # The results message carries both results: its save makes both calls durable too.
    [results] = [e for e in saved if e.boundary == "tool_results"]
    assert results.committed == ("call-1", "call-2")


async def test_a_run_whose_every_save_failed_says_nothing_durable_was_saved() -> None:
    inner = InMemoryStore()
    store = FailingStore(
        inner, times=None, exc_factory=lambda: OSError(30, "Read-only file system")
    )
    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter([answer("done")]))])
    result = await OpenMultiAgent().run_tasks(
        team, [Task("only", "do it", assignee="worker")],
        checkpoint=CheckpointOptions(store=store, run_id="ro"),
    )  # fmt: skip
    assert result.success  # the work was done...
    assert (result.checkpoint_saves, result.checkpoint_save_failures) == (0, 3)
    assert result.status.message is not None
    assert "nothing durable was saved" in result.status.message  # ...and the caller is told
    assert await inner.list() == []


async def test_a_run_with_some_failed_saves_says_where_a_restore_would_continue() -> None:
    inner = InMemoryStore()
    store = FailingStore(inner, nth=2, times=1, exc_factory=lambda: OSError(28, "No space left"))
    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter([answer("done")]))])
    result = await OpenMultiAgent().run_tasks(
        team, [Task("only", "do it", assignee="worker")],
        checkpoint=CheckpointOptions(store=store, run_id="partial"),
    )  # fmt: skip
    assert (result.checkpoint_saves, result.checkpoint_save_failures) == (2, 1)
    assert result.status.message == (
        "completed, but 1 of 3 checkpoint saves failed; a restore continues from revision 2"
    )


async def test_a_run_whose_saves_all_landed_has_a_plain_ok() -> None:
    team = Team("t", [AgentConfig("worker", adapter=ScriptedAdapter([answer("done")]))])
    result = await OpenMultiAgent().run_tasks(
        team, [Task("only", "do it", assignee="worker")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="fine"),
    )  # fmt: skip
    assert (result.status.message, result.checkpoint_saves) == (None, 3)
    assert result.checkpoint_save_failures == 0
