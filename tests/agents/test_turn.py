"""The pure transitions of the runner's turn loop (``oma_actors.agents.turn``), one by one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oma_actors.agents import turn
from oma_actors.domain.approvals import ApprovalRequest
from oma_actors.domain.inflight import PendingCall, RunnerState
from oma_actors.domain.messages import (
    LLMResponse,
    Message,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.tools.base import ToolResult
from oma_actors.tools.executor import ToolOutcome, outcome_of

SEARCH = ToolUseBlock("c1", "search", {"q": "actors"})
WRITE = ToolUseBlock("c2", "write", {"name": "a.md"})


TOOL_TURN_USAGE = TokenUsage(3, 4)
ANSWER_USAGE = TokenUsage(5, 6)


def tool_turn(*calls: ToolUseBlock) -> LLMResponse:
    return LLMResponse(
        [TextBlock("let me look"), *calls], stop_reason="tool_use", usage=TOOL_TURN_USAGE
    )


def answer(text: str, usage: TokenUsage = ANSWER_USAGE) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=usage)


def result(call: ToolUseBlock, text: str) -> ToolOutcome:
    return outcome_of(call, ToolResult(text), 7)


def executing(*calls: ToolUseBlock) -> RunnerState:
    return turn.after_response(turn.initial_state("task"), tool_turn(*calls))


def request(call_id: str) -> ApprovalRequest:
    return ApprovalRequest(
        id=f"apr_{call_id}",
        run_id="run-1",
        scope="tool_call",
        boundary=f"t1:{call_id}",
        request_hash="0" * 64,
        requested_at=datetime(2025, 1, 1, tzinfo=UTC),
        reason=None,
        content={"kind": "tool_call"},
    )


def test_initial_state_holds_only_the_prompt() -> None:
    state = turn.initial_state("Summarise the notes")
    assert state.phase == "awaiting_model"
    assert state.conversation == (Message("user", [TextBlock("Summarise the notes")]),)
    assert state.messages == ()
    assert state.turns == 0
    assert state.token_usage == TokenUsage()
    assert state.pending == ()


def test_a_final_answer_completes_the_run_and_counts_the_turn() -> None:
    start = turn.initial_state("task")
    done = turn.after_response(start, answer("42"))
    assert done.phase == "completed"
    assert done.success is True
    assert done.final_output == "42"
    assert done.turns == 1
    assert done.token_usage == TokenUsage(5, 6)
    assistant = Message("assistant", [TextBlock("42")])
    assert done.conversation == (*start.conversation, assistant)
    assert done.messages == (assistant,)
    assert start.phase == "awaiting_model"  # a transition never changes its input


def test_a_tool_turn_moves_to_executing_tools_with_one_pending_call_per_use_in_order() -> None:
    state = executing(SEARCH, WRITE)
    assert state.phase == "executing_tools"
    assert state.pending == (PendingCall(call=SEARCH), PendingCall(call=WRITE))
    assert state.final_output == ""  # the text beside the calls is not an answer
    assert state.turns == 1
    assert state.token_usage == TokenUsage(3, 4)


def test_turns_and_usage_accumulate_over_responses() -> None:
    state = executing(SEARCH)
    state = turn.after_tool_results(turn.with_commit(state, result(SEARCH, "found")))
    state = turn.after_response(state, answer("done", TokenUsage(10, 1)))
    assert state.turns == 2
    assert state.token_usage == TokenUsage(13, 5)


def test_with_commit_records_only_the_matching_call() -> None:
    state = executing(SEARCH, WRITE)
    outcome = result(WRITE, "written")
    committed = turn.with_commit(state, outcome)
    assert [item.commit for item in committed.pending] == [None, outcome]
    assert committed.uncommitted == (PendingCall(call=SEARCH),)
    assert state.uncommitted == state.pending  # the input is untouched


def test_with_commit_refuses_an_unknown_call_id() -> None:
    stray = result(ToolUseBlock("c9", "search", {}), "x")
    with pytest.raises(ValueError, match="no uncommitted pending call with id 'c9'"):
        turn.with_commit(executing(SEARCH), stray)


def test_with_commit_refuses_a_second_commit_of_the_same_call() -> None:
    # A committed call is replayed, never re-run: recording a second result would change history.
    state = turn.with_commit(executing(SEARCH), result(SEARCH, "first"))
    with pytest.raises(ValueError, match="'c1'"):
        turn.with_commit(state, result(SEARCH, "second"))


def test_tool_results_go_back_in_call_order_whatever_the_commit_order() -> None:
    state = executing(SEARCH, WRITE)
    state = turn.with_commit(state, result(WRITE, "written"))  # the second call finished first
    state = turn.with_commit(state, result(SEARCH, "found"))
    back = turn.after_tool_results(state)
    results = Message(
        "user", [ToolResultBlock("c1", "found", False), ToolResultBlock("c2", "written", False)]
    )
    assert back.phase == "awaiting_model"
    assert back.pending == ()
    assert back.conversation[-1] == results
    assert back.messages[-1] == results
    assert [record.tool_call_id for record in back.tool_calls] == ["c1", "c2"]
    assert [record.output for record in back.tool_calls] == ["found", "written"]


def test_tool_results_are_refused_while_a_call_is_uncommitted() -> None:
    state = turn.with_commit(executing(SEARCH, WRITE), result(SEARCH, "found"))
    with pytest.raises(ValueError, match="still uncommitted"):
        turn.after_tool_results(state)


def test_max_turns_completes_with_the_last_assistant_text() -> None:
    # OMA runner.ts: at ``turns >= maxTurns`` the loop breaks and the output is the last
    # assistant message's text; agent.ts reports success (status ok), so no retry.
    state = turn.after_tool_results(turn.with_commit(executing(SEARCH), result(SEARCH, "x")))
    stopped = turn.stopped_at_max_turns(state)
    assert stopped.phase == "completed"
    assert stopped.final_output == "let me look"
    assert stopped.success is True
    assert (stopped.turns, stopped.messages) == (state.turns, state.messages)


def test_max_turns_with_a_silent_last_assistant_message_has_an_empty_output() -> None:
    silent = LLMResponse([SEARCH], stop_reason="tool_use")
    state = turn.after_response(turn.initial_state("task"), answer("earlier text"))
    state = turn.with_user_message(state, "continue")
    state = turn.after_response(state, silent)  # the LAST assistant message has no text
    stopped = turn.stopped_at_max_turns(state)
    assert (stopped.final_output, stopped.success) == ("", True)


@pytest.mark.parametrize("retryable", [True, False])
def test_failed_keeps_turns_and_usage_and_the_retry_verdict(retryable: bool) -> None:
    state = executing(SEARCH)
    ended = turn.failed(state, "LLMError: 500", retryable=retryable)
    assert ended.phase == "completed"
    assert ended.final_output == "LLMError: 500"
    assert ended.success is False
    assert ended.retryable is retryable
    assert (ended.turns, ended.token_usage) == (state.turns, state.token_usage)


def test_with_user_message_continues_the_conversation_and_clears_the_answer() -> None:
    done = turn.after_response(turn.initial_state("task"), answer("not json"))
    repaired = turn.with_user_message(done, "Answer in JSON.")
    message = Message("user", [TextBlock("Answer in JSON.")])
    assert repaired.phase == "awaiting_model"
    assert repaired.final_output == ""
    assert repaired.conversation[-1] == message
    assert repaired.messages[-1] == message
    assert repaired.turns == done.turns


def test_mark_dispatched_marks_only_the_named_call() -> None:
    state = turn.mark_dispatched(executing(SEARCH, WRITE), "c2")
    assert [item.dispatched for item in state.pending] == [False, True]
    unchanged = turn.mark_dispatched(executing(SEARCH), "c9")
    assert [item.dispatched for item in unchanged.pending] == [False]


def test_attach_request_parks_only_the_named_call() -> None:
    parked = turn.attach_request(executing(SEARCH, WRITE), "c1", request("c1"))
    assert parked.pending[0].approval_request == request("c1")
    assert parked.pending[1].approval_request is None
    assert parked.awaiting_approval == (parked.pending[0],)
