"""The rules a fact changes a conversation by (``journal.transitions``), one by one.

The running run (``agents.turn``) and the fold (``journal.fold_rules``) change a state by these
same functions (D14, issue 19 item 2); each rule is tested here on a draft, then once through
each of its two users, so a rule changed in one place is changed for both.
"""

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
from oma_actors.domain.results import ToolCallRecord
from oma_actors.domain.snapshot import InFlightTask
from oma_actors.journal.event import JournalEvent
from oma_actors.journal.fold_rules import EntryDraft, TailRejected, apply_event
from oma_actors.journal.transitions import (
    Refused,
    StateDraft,
    answered,
    check_rewrite,
    committed,
    final_answer,
    finished,
    prompted,
    results_message,
    returned,
    rewritten,
)
from oma_actors.tools.executor import ToolOutcome

PROMPT = Message("user", [TextBlock("task")])
CALL = ToolUseBlock("c1", "search", {"q": "x"})
OTHER = ToolUseBlock("c2", "write", {"name": "a"})


def start() -> RunnerState:
    return RunnerState(phase="awaiting_model", conversation=(PROMPT,))


def tool_answer(*calls: ToolUseBlock) -> Message:
    return Message("assistant", [TextBlock("looking"), *calls])


def outcome(call: ToolUseBlock, text: str, delegated: TokenUsage | None = None) -> ToolOutcome:
    block = ToolResultBlock(call.id, text)
    record = ToolCallRecord(
        tool_name=call.name, input=dict(call.input), output=text, duration_ms=1,
        tool_call_id=call.id,
    )  # fmt: skip
    return ToolOutcome(block=block, record=record, delegation_usage=delegated)


def executing(*calls: ToolUseBlock) -> StateDraft:
    draft = StateDraft.of(replace(start(), pending_tool_result_text="an earlier round's warning"))
    answered(draft, tool_answer(*calls), TokenUsage(1, 2))
    return draft


def test_an_answer_counts_a_turn_adds_its_usage_and_opens_a_round_for_its_calls() -> None:
    draft = executing(CALL, OTHER)
    assert (draft.phase, draft.turns, draft.token_usage) == ("executing_tools", 1, TokenUsage(1, 2))
    assert [item.call for item in draft.pending] == [CALL, OTHER]
    assert draft.pending_tool_result_text is None  # a new round has no warning yet
    state = draft.state_of(start())
    assert state.conversation == (PROMPT, tool_answer(CALL, OTHER))
    assert state.messages == (tool_answer(CALL, OTHER),)


def test_an_answer_without_calls_leaves_the_phase_to_its_turn_end() -> None:
    # A conversation the caller went on with after an unsuccessful end: the new answer is a
    # success of its own.
    draft = StateDraft.of(replace(start(), success=False))
    answered(draft, Message("assistant", [TextBlock("42")]), TokenUsage(1, 1))
    assert draft.phase == "awaiting_model"
    finished(draft)
    assert (draft.phase, draft.final_output, draft.success) == ("completed", "42", True)
    with pytest.raises(Refused, match=r"closes no final answer \(phase completed\)"):
        finished(draft)  # a second turn end closes nothing


def test_a_second_answer_in_an_open_round_is_refused_and_changes_nothing() -> None:
    draft = executing(CALL)
    with pytest.raises(Refused, match="arrives at executing_tools"):
        answered(draft, tool_answer(OTHER), TokenUsage(5, 5))
    assert (draft.turns, draft.token_usage, len(draft.added)) == (1, TokenUsage(1, 2), 1)


def test_a_commit_fills_its_own_call_once() -> None:
    draft = executing(CALL, OTHER)
    committed(draft, outcome(OTHER, "written"))
    assert [item.commit is not None for item in draft.pending] == [False, True]
    with pytest.raises(Refused, match="no uncommitted pending call with id 'c2'"):
        committed(draft, outcome(OTHER, "again"))
    with pytest.raises(Refused, match="'c9'"):
        committed(draft, outcome(ToolUseBlock("c9", "x", {}), "stray"))
    assert draft.pending[1].commit is not None
    assert draft.pending[1].commit.block.content == "written"


def test_a_commit_outside_a_round_is_refused() -> None:
    with pytest.raises(Refused):
        committed(StateDraft.of(start()), outcome(CALL, "x"))
    # A state that lists a call but whose round is not open (a hand-written snapshot): the
    # phase, not the list, says whether a result may commit.
    closed = executing(CALL)
    closed.phase = "completed"
    with pytest.raises(Refused, match="not pending in an open round"):
        committed(closed, outcome(CALL, "x"))


def test_the_results_close_the_round_with_records_and_delegated_usage() -> None:
    draft = executing(CALL, OTHER)
    committed(draft, outcome(CALL, "found", TokenUsage(10, 20)))
    committed(draft, outcome(OTHER, "written"))
    draft.pending_tool_result_text = "loop warning"
    message = results_message(draft)
    assert message.content[-1] == TextBlock("loop warning")
    returned(draft, message)
    assert (draft.phase, draft.pending, draft.pending_tool_result_text) == (
        "awaiting_model", [], None,
    )  # fmt: skip
    assert draft.token_usage == TokenUsage(11, 22)
    assert [record.output for record in draft.records] == ["found", "written"]
    assert draft.added[-1] is message


def test_results_before_every_commit_are_refused() -> None:
    draft = executing(CALL, OTHER)
    committed(draft, outcome(CALL, "found"))
    with pytest.raises(Refused, match="still uncommitted"):
        results_message(draft)
    partial = Message("user", [outcome(CALL, "found").block])
    with pytest.raises(Refused, match="the runner cannot resume"):
        returned(draft, partial)
    assert draft.phase == "executing_tools"
    assert not draft.records


def test_results_in_another_order_are_refused() -> None:
    draft = executing(CALL, OTHER)
    committed(draft, outcome(CALL, "a"))
    committed(draft, outcome(OTHER, "b"))
    swapped = Message("user", [outcome(OTHER, "b").block, outcome(CALL, "a").block])
    with pytest.raises(Refused):
        returned(draft, swapped)


def test_results_with_no_round_open_are_refused() -> None:
    with pytest.raises(Refused, match="no tool round open"):
        returned(StateDraft.of(start()), Message("user", []))


def test_a_user_message_goes_on_unless_a_round_is_open() -> None:
    done = StateDraft.of(start())
    answered(done, Message("assistant", [TextBlock("42")]), TokenUsage())
    finished(done)
    prompted(done, Message("user", [TextBlock("again")]))
    assert (done.phase, done.final_output) == ("awaiting_model", "")
    with pytest.raises(Refused, match="tool round is open"):
        prompted(executing(CALL), Message("user", [TextBlock("hi")]))


def test_a_rewrite_replaces_the_conversation_not_the_messages_and_counts_its_spend() -> None:
    draft = StateDraft.of(start())
    answered(draft, Message("assistant", [TextBlock("a")]), TokenUsage(1, 1))
    prompted(draft, Message("user", [TextBlock("b")]))
    summary = (Message("user", [TextBlock("summary")]),)
    rewritten(draft, summary, TokenUsage(3, 4))
    assert draft.whole_conversation() == summary
    assert len(draft.messages) == 2
    assert draft.token_usage == TokenUsage(4, 5)


def test_a_rewrite_mid_round_is_refused() -> None:
    draft = executing(CALL)
    with pytest.raises(Refused, match="only before a model call"):
        check_rewrite(draft)
    with pytest.raises(Refused):
        rewritten(draft, (PROMPT,), TokenUsage(9, 9))
    assert draft.token_usage == TokenUsage(1, 2)


def test_a_turn_end_closes_only_an_answer_without_calls() -> None:
    with pytest.raises(Refused, match="closes no final answer"):
        finished(executing(CALL))
    with pytest.raises(Refused, match="closes no final answer"):
        finished(StateDraft.of(start()))  # the conversation ends with the prompt
    assert final_answer(()) is None
    assert final_answer((tool_answer(CALL),)) is None
    assert final_answer((Message("assistant", [TextBlock("a"), TextBlock("b")]),)) == "ab"


def test_a_draft_keeps_what_no_rule_changes() -> None:
    state = RunnerState(
        phase="awaiting_model", conversation=(PROMPT,), retryable=True, budget_exceeded=True,
        loop_warned=True, loop_detected=True,
    )  # fmt: skip
    after = StateDraft.of(state).state_of(state)
    assert after == state
    assert after.conversation is state.conversation


# The two users of the rules: a refusal of the runner is a ValueError (a bug of the loop), one
# of the fold discards the tail with the rule's reason and where it happened.


def test_the_runner_changes_its_state_by_the_rules() -> None:
    state = turn.after_response(
        turn.initial_state("task"), LLMResponse([TextBlock("go"), CALL], usage=TokenUsage(1, 1))
    )
    with pytest.raises(Refused):
        turn.after_response(state, LLMResponse([TextBlock("again")]))
    with pytest.raises(ValueError, match="no uncommitted pending call with id 'c2'"):
        turn.with_commit(state, outcome(OTHER, "x"))
    with pytest.raises(Refused, match="tool round is open"):
        turn.with_user_message(state, "interrupt")


def test_the_fold_discards_a_refused_event_with_where_it_was() -> None:
    draft = executing(CALL)
    item = InFlightTask(task_id="t", assignee="worker", state=draft.state_of(start()))
    event = JournalEvent(
        seq=7, type="assistant/message", run_id="r", attempt=1, timestamp_unix_ms=0,
        task_id="t", agent_name="worker",
        data={"message": {"role": "assistant", "content": [{"type": "text", "text": "x"}]}},
    )  # fmt: skip
    with pytest.raises(TailRejected, match=r"assistant/message at seq 7 \(task 't'\): an answer"):
        apply_event(item, event, enforce_lineage=False)
    assert isinstance(EntryDraft.of_entry(item), StateDraft)
