"""Builders for the tail-fold tests: journaled snapshots, in-flight entries and journal events."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from checkpoint_support import make_snapshot, task_state

from oma_actors.checkpoint import CheckpointSnapshot, InFlightTask
from oma_actors.domain.inflight import PendingCall, RunnerState, ToolCommit
from oma_actors.domain.messages import Message, TextBlock, TokenUsage, ToolResultBlock, ToolUseBlock
from oma_actors.domain.results import ToolCallRecord
from oma_actors.journal.event import JournalEvent

RUN = "run-test"
PROMPT = Message("user", [TextBlock("do b")])
CALL = ToolUseBlock("tu-1", "lookup", {"q": "x"})
CALL_JSON = {"type": "tool_use", "id": "tu-1", "name": "lookup", "input": {"q": "x"}}
RESULT_JSON = {"type": "tool_result", "tool_use_id": "tu-1", "content": "found x"}
RECORD_JSON = {"toolName": "lookup", "input": {"q": "x"}, "output": "found x", "duration": 7}


def entry(
    *,
    task_id: str = "b",
    assignee: str = "worker",
    mark: int | None = 100,
    lineage: bool = False,
    **state: Any,
) -> InFlightTask:
    """An entry at ``awaiting_model`` with only the prompt, turns 1, usage 1/1 (spec JR-15)."""
    fields: dict[str, Any] = {
        "phase": "awaiting_model",
        "conversation": (PROMPT,),
        "turns": 1,
        "token_usage": TokenUsage(1, 1),
    }
    fields.update(state)
    runner = RunnerState(**fields)
    return InFlightTask(
        task_id=task_id,
        assignee=assignee,
        state=runner,
        journal_seq=mark,
        conversation_lineage=(
            tuple(tuple(None for _ in m.content) for m in runner.conversation) if lineage else None
        ),
    )


def executing(*, committed: bool = False, **changes: Any) -> InFlightTask:
    """An entry at ``executing_tools`` with call ``tu-1`` pending (committed if asked)."""
    turn = Message("assistant", [CALL])
    commit = (
        ToolCommit(
            block=ToolResultBlock("tu-1", "found x"),
            record=ToolCallRecord(
                tool_name="lookup", input={"q": "x"}, output="found x", duration_ms=7,
                tool_call_id="tu-1",
            ),
        )
        if committed
        else None
    )  # fmt: skip
    fields: dict[str, Any] = {
        "phase": "executing_tools",
        "conversation": (PROMPT, turn),
        "messages": (turn,),
        "turns": 2,
        "pending": (PendingCall(call=CALL, commit=commit),),
    }
    fields.update(changes)
    return entry(**fields)


def journaled(*entries: InFlightTask, watermark: int = 100) -> CheckpointSnapshot:
    """A v5 snapshot of run ``run-test``: ``a`` completed, ``b`` (and ``c``) in progress."""
    tasks = (
        task_state("a", "completed", result="a done"),
        task_state("b", "in_progress", depends_on=("a",)),
        task_state("c", "in_progress"),
    )
    return make_snapshot(
        tasks=tasks,
        version=5,
        in_flight=entries or (entry(),),
        journal_watermark_seq=watermark,
        journal_ref={"kind": "InMemoryRunJournal"},
    )


def event(
    seq: int,
    kind: str,
    *,
    task: str | None = "b",
    agent: str | None = "worker",
    sources: list[int] | None = None,
    run_id: str = RUN,
    **data: Any,
) -> JournalEvent:
    """A journal event of ``task`` and ``agent`` with the variant fields ``data``."""
    return JournalEvent(
        seq=seq,
        type=kind,
        run_id=run_id,
        attempt=1,
        timestamp_unix_ms=1_700_000_000_000 + seq,
        task_id=task,
        agent_name=agent,
        source_event_seqs=sources,
        data=data,
    )


def assistant_tool_turn(seq: int, **kw: Any) -> JournalEvent:
    """The assistant's tool_use message for ``tu-1``, usage 2/3."""
    message = {"role": "assistant", "content": [CALL_JSON]}
    usage = {"input_tokens": 2, "output_tokens": 3}
    return event(seq, "assistant/message", message=message, origin="response", usage=usage, **kw)


def tool_call(seq: int, **kw: Any) -> JournalEvent:
    """``tool/call`` for ``tu-1``."""
    return event(seq, "tool/call", call=CALL_JSON, **kw)


def tool_result(seq: int, call_id: str = "tu-1", **kw: Any) -> JournalEvent:
    """``tool/result`` committing ``call_id`` with its record."""
    result = {**RESULT_JSON, "tool_use_id": call_id}
    return event(seq, "tool/result", toolCallId=call_id, result=result, record=RECORD_JSON, **kw)


def results_message(seq: int, **kw: Any) -> JournalEvent:
    """The user message carrying the result of ``tu-1``."""
    message = {"role": "user", "content": [RESULT_JSON]}
    return event(seq, "user/message", message=message, origin="tool_results", **kw)


def text_answer(seq: int, **kw: Any) -> JournalEvent:
    """An assistant text message (a final answer)."""
    message = {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
    return event(seq, "assistant/message", message=message, origin="response", **kw)


def whole_round(start: int = 101) -> list[JournalEvent]:
    """JR-15's round: turn start, request, tool turn, call, result, results message, turn end."""
    return [
        event(start, "turn/start", turn=2),
        event(start + 1, "llm/request", turn=2, model="m", blocks=[]),
        assistant_tool_turn(start + 2, sources=[start + 1]),
        tool_call(start + 3, sources=[start + 2]),
        tool_result(start + 4, sources=[start + 3]),
        results_message(start + 5, sources=[start + 4]),
        event(start + 6, "turn/end", turn=2, outcome="tool_use"),
    ]


def with_entries(snapshot: CheckpointSnapshot, *entries: InFlightTask) -> CheckpointSnapshot:
    """``snapshot`` with other in-flight entries."""
    return replace(snapshot, in_flight=entries)
