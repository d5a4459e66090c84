"""A group commit cancelled mid-commit (its appenders hear of it, the cancellation goes on),
which journal a database store keeps beside it, and dispatch marks read back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from oma_actors.journal import InMemoryRunJournal, JournalClosedError
from oma_actors.journal.batching import GroupCommit
from oma_actors.journal.marks import DispatchMark, mark_from_json
from oma_actors.journal.open import journal_beside
from oma_actors.journal.postgres import PostgresRunJournal
from oma_actors.journal.sqlite import SqliteRunJournal
from oma_actors.stores import InMemoryStore
from oma_actors.stores.postgres import PostgresStore
from oma_actors.stores.sqlite import SqliteStore


async def test_a_commit_cancelled_midway_cancels_its_items_and_is_not_swallowed() -> None:
    started = asyncio.Event()

    async def commit(items: Sequence[str]) -> Sequence[str]:
        started.set()
        await asyncio.sleep(30)  # a database that does not answer
        return list(items)

    group: GroupCommit[str, str] = GroupCommit(commit, window_s=0)
    item = group.enqueue("a", now=True)
    await started.wait()
    [flusher] = list(group._flushers)
    flusher.cancel()  # the loop shutting down
    with pytest.raises(asyncio.CancelledError):
        await flusher  # the flusher itself ends cancelled: it did not swallow it
    assert item.cancelled()  # nobody waits forever for a batch that will never answer


def test_the_journal_beside_a_database_store_is_in_its_own_database(tmp_path: Path) -> None:
    # Opened lazily: nothing connects here. Without it a run on PostgreSQL kept no journal.
    beside = journal_beside(PostgresStore("postgresql://u@127.0.0.1:1/db", table="runs"))
    assert isinstance(beside, PostgresRunJournal)
    assert beside.describe()["store"] == "same-database"
    assert isinstance(journal_beside(SqliteStore(tmp_path / "s.db")), SqliteRunJournal)
    assert journal_beside(InMemoryStore()) is None


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
