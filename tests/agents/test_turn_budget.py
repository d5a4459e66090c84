"""OMA's ``maxTokenBudget`` in the pure turn transitions, and the OMA fields they act on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from oma_actors.agents import turn
from oma_actors.domain.inflight import RunnerState
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

CALL = ToolUseBlock("c1", "search", {"q": "x"})


def tool_turn(usage: TokenUsage, text: str = "looking") -> LLMResponse:
    return LLMResponse([TextBlock(text), CALL], stop_reason="tool_use", usage=usage)


def answer(usage: TokenUsage, text: str = "done") -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=usage)


def commit(delegated: TokenUsage | None = None) -> ToolOutcome:
    outcome = outcome_of(CALL, ToolResult("found"), 3)
    return replace(outcome, delegation_usage=delegated)


def results(state: RunnerState, budget: int | None, delegated: TokenUsage | None = None):  # type: ignore[no-untyped-def]
    return turn.after_tool_results(
        turn.with_commit(state, commit(delegated)), max_token_budget=budget
    )


def test_no_budget_never_trips() -> None:
    done = turn.after_response(turn.initial_state("t"), answer(TokenUsage(10**9, 10**9)))
    assert (done.success, done.budget_exceeded) == (True, False)


def test_a_budget_trips_strictly_above_it_as_in_oma() -> None:
    at = turn.after_response(turn.initial_state("t"), answer(TokenUsage(3, 2)), max_token_budget=5)
    assert (at.success, at.budget_exceeded) == (True, False)
    over = turn.after_response(
        turn.initial_state("t"), answer(TokenUsage(3, 3)), max_token_budget=5
    )
    assert over.phase == "completed"
    assert (over.success, over.retryable, over.budget_exceeded) == (False, False, True)
    assert over.final_output == "done"  # OMA keeps the text of the turn that tripped it
    assert over.token_usage == TokenUsage(3, 3)


def test_a_tool_turn_over_budget_still_runs_its_calls_then_stops() -> None:
    # OMA defers the stop until the results are in, so no tool_use is left without a result.
    state = turn.after_response(
        turn.initial_state("t"), tool_turn(TokenUsage(4, 4)), max_token_budget=5
    )
    assert (state.phase, state.budget_exceeded) == ("executing_tools", True)
    stopped = results(state, 5)
    assert stopped.phase == "completed"
    assert (stopped.success, stopped.retryable) == (False, False)
    assert stopped.final_output == "looking"  # the last assistant text
    assert stopped.conversation[-1] == Message("user", [ToolResultBlock("c1", "found", False)])
    assert [record.tool_call_id for record in stopped.tool_calls] == ["c1"]


def test_restored_usage_counts_toward_the_budget() -> None:
    # Spec RN-05: a restored runner continues from its saved usage; a fresh count (2) would not
    # reach the budget, the carried one (4 + 2) does.
    restored = replace(turn.initial_state("t"), turns=1, token_usage=TokenUsage(2, 2))
    fresh = turn.after_response(
        turn.initial_state("t"), answer(TokenUsage(1, 1)), max_token_budget=5
    )
    carried = turn.after_response(restored, answer(TokenUsage(1, 1)), max_token_budget=5)
    assert fresh.budget_exceeded is False
    assert carried.budget_exceeded is True
    assert (carried.turns, carried.token_usage) == (2, TokenUsage(3, 3))


def test_a_restored_exceeded_flag_stays_set() -> None:
    state = turn.after_response(turn.initial_state("t"), tool_turn(TokenUsage(1, 1)))
    flagged = replace(state, budget_exceeded=True)  # as restored from OMA's budgetExceeded
    stopped = results(flagged, None)
    assert (stopped.phase, stopped.success) == ("completed", False)


def test_delegation_usage_is_added_with_the_results_and_can_trip_the_budget() -> None:
    # OMA: a commit's delegationUsage is the delegated sub-agent's usage; 1/1 + 5/7 gives 6/8.
    state = turn.after_response(turn.initial_state("t"), tool_turn(TokenUsage(1, 1)))
    unbounded = results(state, None, TokenUsage(5, 7))
    assert unbounded.token_usage == TokenUsage(6, 8)
    assert unbounded.phase == "awaiting_model"
    bounded = results(state, 13, TokenUsage(5, 7))
    assert bounded.budget_exceeded is True
    assert (bounded.phase, bounded.success) == ("completed", False)
    within = results(state, 14, TokenUsage(5, 7))
    assert (within.phase, within.budget_exceeded) == ("awaiting_model", False)


@pytest.mark.parametrize("budget", [None, 100])
def test_pending_tool_result_text_follows_the_results_once(budget: int | None) -> None:
    state = turn.after_response(turn.initial_state("t"), tool_turn(TokenUsage(1, 1)))
    warned = replace(state, pending_tool_result_text="You are repeating yourself.")
    back = results(warned, budget)
    assert back.conversation[-1] == Message(
        "user",
        [ToolResultBlock("c1", "found", False), TextBlock("You are repeating yourself.")],
    )
    assert back.pending_tool_result_text is None


def test_the_flag_is_never_cleared_by_a_later_response() -> None:
    # OMA's budgetExceeded only ever goes from false to true, whatever a later response costs.
    flagged = replace(turn.initial_state("t"), budget_exceeded=True)
    done = turn.after_response(flagged, answer(TokenUsage(1, 1)), max_token_budget=100)
    assert (done.budget_exceeded, done.success) == (True, False)
