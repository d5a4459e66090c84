"""Dispatch marks read back: a mark of the wrong shape is refused, and a closed journal takes
none (a mark says "this call may have run: never run it again")."""

from __future__ import annotations

import json

import pytest

from oma_actors.journal import InMemoryRunJournal, JournalClosedError
from oma_actors.journal.marks import DispatchMark, mark_from_json

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
