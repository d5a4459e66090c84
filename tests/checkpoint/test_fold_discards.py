"""The tail fold's defensive checks (spec JR-16, JR-17): any failure discards the whole tail."""

from __future__ import annotations

import pytest
from fold_support import (
    RESULT_JSON,
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

from oma_actors.checkpoint import CheckpointSnapshot
from oma_actors.journal.event import RECORDED_RESULT, JournalEvent
from oma_actors.journal.fold import (
    JOURNAL_TAIL_DISCARDED,
    Discarded,
    Folded,
    StartedCall,
    fold_tail,
)


def _discarded(
    snapshot: CheckpointSnapshot, events: list[JournalEvent], needle: str, **kw: bool
) -> Discarded:
    """Fold, check the tail was discarded for ``needle`` and the snapshot kept as it was."""
    result = fold_tail(snapshot, events, **kw)
    assert isinstance(result, Discarded), result
    assert needle in result.reason
    assert result.code == JOURNAL_TAIL_DISCARDED
    assert result.folded_events == 0
    assert result.snapshot == snapshot
    return result


def test_a_repeated_seq_discards_the_tail() -> None:
    events = [tool_result(101), tool_result(101)]
    result = _discarded(journaled(executing()), events, "append-only")
    assert result.seq == 101


def test_a_decreasing_seq_discards_the_tail() -> None:
    # The out-of-order event belongs to no entry: the order is checked on the whole tail.
    events = [tool_result(103), event(102, "task/status", task="z", status="completed")]
    _discarded(journaled(executing()), events, "append-only")


def test_a_result_for_an_unknown_call_is_not_pending() -> None:
    """T-104's foreign journal: a ``tool/result`` for a call the entry never made."""
    _discarded(journaled(executing()), [tool_result(101, call_id="tu-foreign")], "not pending")


def test_a_second_result_for_a_committed_call_is_not_pending() -> None:
    _discarded(journaled(executing(committed=True)), [tool_result(101)], "not pending")


def test_a_result_with_no_round_open_is_not_pending() -> None:
    _discarded(journaled(entry()), [tool_result(101)], "not pending")


def test_an_unanchored_tool_round_is_discarded() -> None:
    """T-113: no mark, watermark 105: the round's tool turn (seq 103) is below the tail."""
    snapshot = journaled(entry(mark=None), watermark=105)
    events = [e for e in whole_round(101) if e.seq >= 106]
    result = _discarded(snapshot, [tool_call(105 + 1), *events[1:]], "no assistant turn")
    assert result.snapshot.in_flight == snapshot.in_flight


def test_a_call_the_tool_turn_did_not_request_is_discarded() -> None:
    other = tool_call(102)
    other.data["call"] = {**other.data["call"], "id": "tu-2"}
    _discarded(journaled(entry()), [assistant_tool_turn(101), other], "no assistant turn")


def test_a_call_of_another_tool_under_the_same_id_is_discarded() -> None:
    other = tool_call(102)
    other.data["call"] = {**other.data["call"], "name": "delete_everything"}
    _discarded(journaled(entry()), [assistant_tool_turn(101), other], "no assistant turn")


def test_results_for_other_calls_are_discarded() -> None:
    results = results_message(101)
    results.data["message"] = {"role": "user", "content": [{**RESULT_JSON, "tool_use_id": "tu-9"}]}
    _discarded(journaled(executing(committed=True)), [results], "cannot resume from")


def test_tool_results_with_no_round_open_are_discarded() -> None:
    _discarded(journaled(entry()), [results_message(101)], "no tool round open")


def test_an_answer_at_awaiting_model_cannot_be_resumed_from() -> None:
    """T-110: the runner would send the model its own answer back."""
    _discarded(journaled(entry()), [text_answer(101)], "cannot resume from")


def test_a_second_answer_while_a_round_is_open_is_discarded() -> None:
    _discarded(journaled(executing()), [text_answer(101)], "cannot resume from")


def test_results_that_do_not_answer_the_round_are_discarded() -> None:
    # The call has no commit: the results message cannot be the round's (no record to keep).
    _discarded(journaled(executing()), [results_message(101)], "cannot resume from")


def test_a_plain_user_message_inside_a_round_is_discarded() -> None:
    prompt = event(101, "user/message", message={"role": "user", "content": "hi"}, origin="input")
    _discarded(journaled(executing()), [prompt], "cannot resume from")


def test_an_event_of_another_run_discards_the_tail() -> None:
    _discarded(journaled(executing()), [tool_result(101, run_id="run-other")], "run-other")


@pytest.mark.parametrize(
    "broken",
    [
        event(101, "tool/result", toolCallId="tu-1"),  # no result block
        event(101, "assistant/message", message={"role": "user", "content": "x"}),
        event(101, "assistant/message", message={"role": "assistant", "content": [{"type": "?"}]}),
        event(101, "turn/end", turn=2.5, outcome="tool_use"),
        event(101, "tool/result", toolCallId="tu-1", result={**RESULT_JSON, "tool_use_id": "tu-9"}),
        event(101, "tool/call", call={"type": "text", "text": "x"}),
    ],
    ids=[
        "result-without-block",
        "wrong-role",
        "unknown-block",
        "turn-not-int",
        "result-for-another-call",
        "call-not-tool",
    ],
)
def test_a_malformed_event_discards_the_tail(broken: JournalEvent) -> None:
    _discarded(journaled(entry()), [broken], "malformed")


def test_one_bad_event_discards_what_came_before_it_too() -> None:
    """Any failure discards the ENTIRE tail: the good commit before it is not kept."""
    snapshot = journaled(executing())
    result = _discarded(snapshot, [tool_result(101), text_answer(102)], "cannot resume from")
    assert result.snapshot.in_flight[0].state.pending[0].commit is None


def test_a_bad_event_of_one_entry_discards_the_others_folds() -> None:
    b, c = executing(), executing(task_id="c")
    events = [tool_result(101), tool_result(102, call_id="tu-x", task="c")]
    _discarded(journaled(b, c), events, "not pending")


def test_enforce_lineage_refuses_a_message_without_sources() -> None:
    events = whole_round(101)
    events[2] = assistant_tool_turn(103)  # its llm/request is not named
    _discarded(journaled(entry()), events, "enforce_lineage", enforce_lineage=True)
    assert isinstance(fold_tail(journaled(entry()), events), Folded)  # off: folded


def test_enforce_lineage_accepts_a_round_that_names_its_sources() -> None:
    result = fold_tail(journaled(entry()), whole_round(101), enforce_lineage=True)
    assert isinstance(result, Folded)
    assert result.folded_events == 5


def test_enforce_lineage_lets_a_prompt_start_the_lineage() -> None:
    prompt = event(
        102, "user/message", message={"role": "user", "content": "again"}, origin="input"
    )
    result = fold_tail(
        journaled(entry()), [text_answer(101, sources=[100]), prompt], enforce_lineage=True
    )
    assert isinstance(result, Folded)


# -- D1: a discarded tail still says which calls started ----------------------------------------


def test_a_discarded_tail_reports_the_calls_it_shows_started() -> None:
    snapshot = journaled(entry())
    events = [
        assistant_tool_turn(101),
        tool_call(102),
        tool_result(103),
        tool_call(104, task="c"),
        tool_result(105, call_id="tu-foreign"),
        text_answer(106),  # makes the tail fail
    ]
    result = fold_tail(snapshot, events)
    assert isinstance(result, Discarded)
    assert set(result.started_calls) == {
        StartedCall(task_id="b", agent_name="worker", call_id="tu-1", seq=102, has_result=True),
        StartedCall(task_id="c", agent_name="worker", call_id="tu-1", seq=104, has_result=False),
        StartedCall(
            task_id="b", agent_name="worker", call_id="tu-foreign", seq=105, has_result=True
        ),
    }


def test_a_folded_tail_reports_its_started_calls_too() -> None:
    result = fold_tail(journaled(entry()), [assistant_tool_turn(101), tool_call(102)])
    assert isinstance(result, Folded)
    assert result.started_calls == (
        StartedCall(task_id="b", agent_name="worker", call_id="tu-1", seq=102, has_result=False),
    )
    assert result.snapshot.in_flight[0].state.uncommitted[0].call.id == "tu-1"


@pytest.mark.parametrize(
    ("start", "broken", "reason"),
    [
        ("idle", event(101, "tool/call", call={"type": "text", "text": "x"}),
         "call is not a tool_use block"),
        ("committed", event(101, "user/message", origin="tool_results", message={
            "role": "user", "content": [{"type": "text", "text": "x", RECORDED_RESULT: 100}]}),
         "'text' block cannot refer to a recorded result"),
        ("executing", event(101, "tool/result", toolCallId="tu-1", result=RESULT_JSON,
                            record=[1]), "record is not an object"),
        ("idle", event(101, "context/replace", replacements={"block": "x"}),
         "replacements must be a list"),
        ("executing", event(101, "context/replace", replacements=[]),
         "a strategy rewrites the conversation only before a model call"),
    ],
    ids=["call-not-tool", "text-refers", "record-not-object", "replacements-not-list",
         "rewrite-mid-round"],
)  # fmt: skip
def test_a_malformed_event_is_discarded_for_what_it_breaks(
    start: str, broken: JournalEvent, reason: str
) -> None:
    # Each rule names what it refuses: a tail is never folded past an event it cannot read,
    # and the reason says which rule (not whichever attribute failed next).
    base = {"idle": entry(), "executing": executing(), "committed": executing(committed=True)}
    _discarded(journaled(base[start]), [broken], reason)


def test_a_started_call_without_a_string_id_is_not_listed() -> None:
    # Read leniently (the tail may be refused): a call no id names cannot be marked started,
    # and a ``None`` id would mark nothing or the wrong call.
    events = [
        assistant_tool_turn(101),
        event(102, "tool/call", call={"name": "lookup", "input": {}}),  # no id
        event(103, "tool/result", toolCallId=7, result=RESULT_JSON),  # an id that is no string
        event(104, "tool/call", call="not an object"),
        tool_call(105),
    ]
    result = fold_tail(journaled(entry()), events)
    assert [call.call_id for call in result.started_calls] == ["tu-1"]


def test_a_turn_completed_after_the_results_message_closes_no_final_answer() -> None:
    # The conversation ends with the tool results (a user message), not an answer: a
    # "completed" turn there would make the results text the task's final output.
    events = [*whole_round(101)[:-1], event(107, "turn/end", turn=2, outcome="completed")]
    result = fold_tail(journaled(entry(lineage=True)), events)
    assert isinstance(result, Discarded), result
    assert "closes no final answer" in result.reason
    assert result.seq == 107
