"""The fold of a journal-first tail that writes each tool output once (issue 19, item 5).

A journal-first ``tool/result`` leaves out its record's ``output`` when it is the result's text,
and the results message refers to each ``tool/result`` (``{"tool_use_id", "recorded": seq}``)
instead of repeating its block. The fold rebuilds both from the entry's commits, so the state is
the one the old form (every output written in full, still read) folds to.
"""

from __future__ import annotations

from typing import Any

from fold_support import (
    RECORD_JSON,
    assistant_tool_turn,
    entry,
    event,
    executing,
    journaled,
    tool_call,
    tool_result,
    whole_round,
)

from oma_actors.journal.event import RECORDED_RESULT, JournalEvent
from oma_actors.journal.fold import Discarded, Folded, fold_tail


def _folded(result: object) -> Folded:
    assert isinstance(result, Folded), result
    return result


def referring_results(seq: int, result_seq: int, call_id: str = "tu-1", **kw: Any) -> JournalEvent:
    """The journal-first results message: a reference to the ``tool/result`` at ``result_seq``."""
    block = {"type": "tool_result", "tool_use_id": call_id, RECORDED_RESULT: result_seq}
    message = {"role": "user", "content": [block]}
    return event(seq, "user/message", message=message, origin="tool_results", **kw)


def once(start: int = 101) -> list[JournalEvent]:
    """``whole_round`` as journal-first writes it now: each output once."""
    events = whole_round(start)
    events[4].data["record"] = {"duration": RECORD_JSON["duration"]}
    events[5] = referring_results(start + 5, start + 4, sources=[start + 4])
    return events


def test_a_round_written_once_folds_to_the_state_of_the_old_form() -> None:
    old = _folded(fold_tail(journaled(entry(lineage=True)), whole_round(101)))
    new = _folded(fold_tail(journaled(entry(lineage=True)), once(101)))
    assert new.snapshot.in_flight == old.snapshot.in_flight
    state = new.snapshot.in_flight[0].state
    assert state.conversation[-1].content[0].content == "found x"  # type: ignore[union-attr]
    assert state.tool_calls[0].output == "found x"


def test_a_record_written_once_takes_its_calls_name_and_input_and_the_results_text() -> None:
    result_event = tool_result(101)
    result_event.data["record"] = {"duration": 7}
    item = _folded(fold_tail(journaled(executing()), [result_event])).snapshot.in_flight[0]
    commit = item.state.pending[0].commit
    assert commit is not None
    record = commit.record
    assert (record.tool_name, record.input, record.output, record.duration_ms) == (
        "lookup",
        {"q": "x"},
        "found x",
        7,
    )
    assert record.tool_call_id == "tu-1"


def test_a_record_keeps_what_differs_from_its_call() -> None:
    result_event = tool_result(101)
    result_event.data["record"] = {"input": {"q": "edited"}, "output": "own", "duration": 7}
    item = _folded(fold_tail(journaled(executing()), [result_event])).snapshot.in_flight[0]
    commit = item.state.pending[0].commit
    assert commit is not None
    assert (commit.record.input, commit.record.output) == ({"q": "edited"}, "own")


def test_a_reference_to_a_result_committed_under_the_snapshot_folds() -> None:
    """The ``tool/result`` is at or below the entry's mark: the snapshot's commit is the block."""
    snapshot = journaled(executing(committed=True))
    item = _folded(fold_tail(snapshot, [referring_results(102, 99)])).snapshot.in_flight[0]
    assert item.state.phase == "awaiting_model"
    assert item.state.conversation[-1].content[0].content == "found x"  # type: ignore[union-attr]


def test_a_reference_to_an_uncommitted_call_discards_the_tail() -> None:
    events = [assistant_tool_turn(101), tool_call(102), referring_results(103, 102)]
    result = fold_tail(journaled(entry()), events)
    assert isinstance(result, Discarded), result
    assert "refers to the result of call 'tu-1'" in result.reason
    assert result.seq == 103


def test_a_results_message_mixing_a_reference_and_a_block_written_in_full_folds_both() -> None:
    # Only the referring blocks are looked up: a block written in full beside them (one whose
    # text differs from its commit, or any other block) is read as it is.
    events = once(101)
    events[5].data["message"]["content"].append({"type": "text", "text": "see above"})
    state = _folded(fold_tail(journaled(entry(lineage=True)), events)).snapshot.in_flight[0].state
    content = state.conversation[-1].content
    assert content[0].content == "found x"  # type: ignore[union-attr]
    assert content[1].text == "see above"  # type: ignore[union-attr]
