"""The tail fold's rules (spec JR-11..JR-15): what is folded into which entry, and how."""

from __future__ import annotations

from dataclasses import replace

from checkpoint_support import KEY, make_snapshot
from fold_support import (
    PROMPT,
    assistant_tool_turn,
    entry,
    event,
    executing,
    journaled,
    results_message,
    text_answer,
    tool_call,
    tool_result,
    whole_round,
)

from oma_actors.checkpoint import decode, encode
from oma_actors.checkpoint.validate import problem
from oma_actors.domain.messages import TokenUsage
from oma_actors.journal.fold import Folded, fold_tail, tail_read_from


def _folded(result: object) -> Folded:
    assert isinstance(result, Folded), result
    return result


# -- JR-12: where the tail starts, and what is already in an entry --------------------------------


def test_read_from_is_the_lowest_entry_mark_plus_one() -> None:
    assert tail_read_from(journaled(entry(mark=100), watermark=105)) == 101


def test_read_from_falls_back_to_the_watermark_without_a_mark() -> None:
    assert tail_read_from(journaled(entry(mark=None), watermark=105)) == 106
    both = journaled(entry(mark=None), entry(task_id="c", mark=103), watermark=105)
    assert tail_read_from(both) == 104


def test_read_from_without_entries_is_after_the_watermark() -> None:
    assert tail_read_from(replace(journaled(), in_flight=())) == 101


def test_read_from_a_v4_snapshot_is_the_start() -> None:
    assert tail_read_from(make_snapshot()) == 1


def test_an_event_at_or_below_the_entry_mark_is_skipped_not_an_error() -> None:
    # The commit at seq 100 is already in the entry; folding it again would be "not pending".
    snapshot = journaled(executing(committed=True, mark=100))
    result = _folded(fold_tail(snapshot, [tool_result(99), tool_result(100)]))
    assert result.folded_events == 0
    assert result.snapshot.in_flight == snapshot.in_flight


def test_an_entry_without_a_mark_uses_the_watermark() -> None:
    snapshot = journaled(executing(committed=True, mark=None), watermark=105)
    result = _folded(fold_tail(snapshot, [tool_result(105)]))
    assert result.folded_events == 0


def test_each_entry_has_its_own_mark() -> None:
    # ``c`` already holds seq 102 (its mark is 103); ``b`` (mark 100) does not.
    b, c = executing(mark=100), executing(task_id="c", mark=103)
    events = [tool_result(102), tool_result(102 + 1, task="c")]
    result = _folded(fold_tail(journaled(b, c), events))
    assert result.folded_events == 1
    folded_b, folded_c = result.snapshot.in_flight
    assert folded_b.state.pending[0].commit is not None
    assert folded_b.journal_seq == 102
    assert folded_c == c


# -- JR-11: only a v5 snapshot has a tail --------------------------------------------------------


def test_a_v4_snapshot_folds_nothing() -> None:
    snapshot = make_snapshot(in_flight=(executing(mark=None),))
    result = _folded(fold_tail(snapshot, [tool_result(101)]))
    assert result.folded_events == 0
    assert result.snapshot == snapshot


def test_a_decoded_v5_value_folds_with_its_stored_marks() -> None:
    """``decode`` leaves the v5 members in ``source``; the fold reads them (JR-11)."""
    stored = decode(encode(journaled(executing(mark=100))), key=KEY)
    assert stored.journal_watermark_seq is None
    result = _folded(fold_tail(stored, [tool_result(101)]))
    assert result.folded_events == 1
    assert result.snapshot.journal_watermark_seq == 100
    assert result.snapshot.in_flight[0].journal_seq == 101


# -- JR-13: events are matched by task and agent --------------------------------------------------


def test_other_tasks_and_delegated_children_are_ignored() -> None:
    snapshot = journaled(executing())
    events = [
        tool_result(101, call_id="tu-child", agent="child"),  # a delegated child of task b
        tool_result(102, call_id="tu-other", task="z"),  # a task with no entry
        text_answer(103, task="c"),  # task c has no entry in this snapshot
        text_answer(104, task=None, agent=None),  # run-level
    ]
    result = _folded(fold_tail(snapshot, events))
    assert result.folded_events == 0
    assert result.snapshot.in_flight == snapshot.in_flight


def test_an_entry_for_the_same_task_and_another_agent_gets_nothing() -> None:
    snapshot = journaled(executing(assignee="reviewer"))
    result = _folded(fold_tail(snapshot, [tool_result(101)]))  # agent "worker"
    assert result.folded_events == 0


# -- JR-14: folded types and ignored types ---------------------------------------------------------


def test_status_memory_and_approval_events_leave_the_entry_unchanged() -> None:
    snapshot = journaled(executing())
    events = [
        event(101, "task/status", status="in_progress"),
        event(102, "memory/set", agent="worker", key="k"),
        event(103, "approval/request", request={"id": "apr_1"}),
        event(104, "approval/decision", decision={"requestId": "apr_1"}),
        event(105, "checkpoint/saved", mode="runTasks", version=5, watermarkSeq=104),
    ]
    result = _folded(fold_tail(snapshot, events))
    assert result.folded_events == 0
    assert result.snapshot.in_flight == snapshot.in_flight
    # ... and the tail stays usable: a later commit still folds.
    after = _folded(fold_tail(snapshot, [*events, tool_result(106)]))
    assert after.folded_events == 1


def test_a_lone_tool_result_attaches_the_commit() -> None:
    result = _folded(fold_tail(journaled(executing()), [tool_result(101)]))
    assert result.folded_events == 1
    (item,) = result.snapshot.in_flight
    commit = item.state.pending[0].commit
    assert commit is not None
    assert commit.block.content == "found x"
    assert (commit.record.tool_name, commit.record.output, commit.record.duration_ms) == (
        "lookup",
        "found x",
        7,
    )
    assert item.state.phase == "executing_tools"
    assert item.state.tool_calls == ()  # the record joins toolCalls with the results message
    assert item.journal_seq == 101


def test_a_commit_carries_its_delegation_usage_into_the_round() -> None:
    result_event = tool_result(101)
    result_event.data["delegationUsage"] = {"input_tokens": 10, "output_tokens": 20}
    folded = _folded(fold_tail(journaled(executing()), [result_event, results_message(102)]))
    (item,) = folded.snapshot.in_flight
    assert item.state.token_usage == TokenUsage(11, 21)


def test_a_result_without_its_record_gets_one_from_the_call() -> None:
    result_event = tool_result(101)
    del result_event.data["record"]
    item = _folded(fold_tail(journaled(executing()), [result_event])).snapshot.in_flight[0]
    commit = item.state.pending[0].commit
    assert commit is not None
    assert (commit.record.tool_name, commit.record.input, commit.record.output) == (
        "lookup",
        {"q": "x"},
        "found x",
    )


def test_a_whole_round_is_rebuilt() -> None:
    """JR-15: a stale entry with only the prompt gets the whole round back."""
    result = _folded(fold_tail(journaled(entry(mark=100)), whole_round(101)))
    (item,) = result.snapshot.in_flight
    state = item.state
    assert [m.role for m in state.conversation] == ["user", "assistant", "user"]
    assert state.conversation[0] == PROMPT
    assert state.phase == "awaiting_model"
    assert state.pending == ()
    assert state.turns == 2
    assert [r.tool_name for r in state.tool_calls] == ["lookup"]
    assert state.token_usage == TokenUsage(3, 4)
    assert item.journal_seq == 107
    assert result.folded_events == 5  # turn/start and llm/request are not folded


def test_turn_end_sets_the_turn_counter() -> None:
    snapshot = journaled(executing(turns=2))
    result = _folded(fold_tail(snapshot, [event(101, "turn/end", turn=5, outcome="tool_use")]))
    assert result.snapshot.in_flight[0].state.turns == 5


def test_an_error_turn_end_names_the_opened_turn_but_counts_none() -> None:
    """OMA's turn/end after a provider error says the turn it opened; no turn was completed."""
    snapshot = journaled(entry(turns=1))
    result = _folded(fold_tail(snapshot, [event(101, "turn/end", turn=2, outcome="error")]))
    assert result.snapshot.in_flight[0].state.turns == 1
    assert result.snapshot.in_flight[0].journal_seq == 101


def test_a_plain_user_message_after_an_answer_is_resumable() -> None:
    """An answer followed by a user message (a repair request) ends on the user: resumable."""
    repair = event(
        102, "user/message", message={"role": "user", "content": "again"}, origin="input"
    )
    result = _folded(fold_tail(journaled(entry()), [text_answer(101), repair]))
    state = result.snapshot.in_flight[0].state
    assert [m.role for m in state.conversation] == ["user", "assistant", "user"]
    assert state.phase == "awaiting_model"


def test_folded_messages_get_the_lineage_of_their_events() -> None:
    result = _folded(fold_tail(journaled(entry(lineage=True)), whole_round(101)))
    (item,) = result.snapshot.in_flight
    assert item.conversation_lineage == ((None,), ((103,),), ((106,),))
    written = encode(result.snapshot)
    assert problem(decode(written, key=KEY).raw) is None
    assert '"conversationLineage":[[null],[[103]],[[106]]]' in written


def test_a_round_in_two_steps_matches_one_step() -> None:
    events = whole_round(101)
    first = _folded(fold_tail(journaled(entry()), events[:4]))  # up to the tool/call
    assert first.snapshot.in_flight[0].state.phase == "executing_tools"
    second = _folded(fold_tail(first.snapshot, events))
    assert second.folded_events == 3
    once = _folded(fold_tail(journaled(entry()), events))
    assert second.snapshot.in_flight == once.snapshot.in_flight


def test_a_tool_turn_opens_the_round_with_its_calls_pending() -> None:
    result = _folded(fold_tail(journaled(entry()), [assistant_tool_turn(101), tool_call(102)]))
    state = result.snapshot.in_flight[0].state
    assert state.phase == "executing_tools"
    assert [p.call.id for p in state.pending] == ["tu-1"]
    assert state.uncommitted == state.pending


def test_a_completed_turn_end_folds_the_final_answer() -> None:
    """D14: the answer and its ``turn/end`` completed give the runner's terminal state."""
    answer = [text_answer(101), event(102, "turn/end", turn=2, outcome="completed")]
    result = _folded(fold_tail(journaled(entry()), answer))
    state = result.snapshot.in_flight[0].state
    assert state.phase == "completed"
    assert state.final_output == "done"
    assert state.success
    assert state.turns == 2


def test_a_completed_turn_end_without_a_final_answer_is_discarded() -> None:
    """A ``turn/end`` completed after a tool turn closes no answer: the tail is refused."""
    snapshot = journaled(entry())
    tail = [assistant_tool_turn(101), event(102, "turn/end", turn=2, outcome="completed")]
    result = fold_tail(snapshot, tail)
    assert not isinstance(result, Folded)
    assert "closes no final answer" in result.reason
