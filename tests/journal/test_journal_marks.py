"""Dispatch marks: a mark of the wrong shape is refused, a closed journal takes none (a mark
says "this call may have run: never run it again"), and every unsafe dispatch of a run gets one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
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
from oma_actors.errors import OverloadedError
from oma_actors.journal import (
    InMemoryRunJournal,
    JournalClosedError,
    JournalOptions,
    JsonlRunJournal,
)
from oma_actors.journal.marks import DispatchMark, mark_from_json
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore
from oma_actors.testing import ScriptedAdapter

GOOD_MARK = {"runId": "r", "seq": 3, "taskId": "t", "agentName": "w", "callId": "c1"}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[1]", "a dispatch mark is a JSON object"),
        ('"mark"', "a dispatch mark is a JSON object"),
        (json.dumps({**GOOD_MARK, "runId": 1}), "not a dispatch mark"),
        (json.dumps({**GOOD_MARK, "callId": None}), "not a dispatch mark"),
        (json.dumps({**GOOD_MARK, "seq": True}), "not a dispatch mark"),
        (json.dumps({**GOOD_MARK, "seq": "3"}), "not a dispatch mark"),
        (json.dumps({**GOOD_MARK, "taskId": 5}), "not a dispatch mark"),
        (json.dumps({**GOOD_MARK, "agentName": []}), "not a dispatch mark"),
    ],
)
def test_a_dispatch_mark_of_the_wrong_shape_is_refused(text: str, named: str) -> None:
    # A mark says "this call may have run: never run it again"; one read wrongly would mark
    # another call, or none.
    with pytest.raises(ValueError, match=named):
        mark_from_json(text)


def test_a_dispatch_mark_round_trips() -> None:
    mark = mark_from_json(json.dumps(GOOD_MARK))
    assert (mark.run_id, mark.seq, mark.task_id, mark.agent_name, mark.call_id) == (
        "r", 3, "t", "w", "c1",
    )  # fmt: skip
    assert mark_from_json(json.dumps({**GOOD_MARK, "taskId": None})).task_id is None


async def test_a_closed_in_memory_journal_refuses_a_dispatch_mark() -> None:
    # A mark that landed after the close would be one no reader of the closed journal sees.
    journal = InMemoryRunJournal()
    await journal.close()
    with pytest.raises(JournalClosedError, match="InMemoryRunJournal is closed"):
        await journal.mark(
            DispatchMark(run_id="r", seq=1, task_id="t", agent_name="w", call_id="c")
        )
    assert await journal.marks_of("r") == []


async def test_a_later_call_named_like_a_committed_one_gets_its_own_mark(tmp_path: Path) -> None:
    # A task's retry starts a fresh conversation, where a model may name its call like the
    # failed attempt's committed one (the loop keeps ids unique within one conversation only).
    # Each unsafe dispatch needs its own mark: with the first call's mark alone, a journal cut
    # between the two dispatches would not show that the second may have run.
    class Text(BaseModel):
        text: str

    async def pay(args: Text, ctx: ToolContext) -> str:
        return "paid"

    answers = iter(["pay", "fail", "pay", "done"])

    def model(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        step = next(answers)
        if step == "fail":
            raise OverloadedError("scripted", "try again later")
        if step == "pay":
            use = ToolUseBlock("c", "pay", {"text": "once"})
            return LLMResponse([use], stop_reason="tool_use", usage=TokenUsage(1, 1))
        return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))

    tool = define_tool(name="pay", description="d", input_model=Text, execute=pay, effect="unsafe")
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(model), tools=[tool])])
    journal = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0)
    try:
        result = await OpenMultiAgent().run_tasks(
            team, [Task("a", "x", assignee="w", id="t0", max_retries=1)],
            checkpoint=CheckpointOptions(store=FileStore(tmp_path / "state.json"), run_id="r"),
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
        assert result.success, result.status
        marks = await journal.marks_of("r")
    finally:
        await journal.close()
    assert [mark.call_id for mark in marks] == ["c", "c"]
    assert marks[0].seq < marks[1].seq
