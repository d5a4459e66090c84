"""A database journal's ``read_range`` (``RangeReader``): what it leaves unparsed, what it names;
and its dispatch marks read back strictly.

The contract (``test_journal_contract``) checks the bounds and types on every backend; here, on
SQLite rows written by hand: a row's type is read from its start when it shows it there, and
from its parse otherwise; a row it must read that does not parse is an error naming the row.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

import pytest

from oma_actors.journal import JournalCorruptError, SqliteRunJournal
from oma_actors.journal.base import RangeReader
from oma_actors.journal.marks import DispatchMark
from oma_actors.journal.sqlite import JOURNAL_TABLE, MARKS_TABLE

if TYPE_CHECKING:
    from pathlib import Path


def _line(seq: int, kind: str, *, type_first: bool = True) -> str:
    base = {"seq": seq, "timestampUnixMs": seq, "runId": "r", "attempt": 1, "n": seq}
    return json.dumps({"type": kind, **base} if type_first else {**base, "type": kind})


async def _journal(tmp_path: Path, rows: list[tuple[int, str]]) -> SqliteRunJournal:
    journal = SqliteRunJournal(tmp_path / "state.db")
    await journal.read_from(0)  # creates the tables
    with sqlite3.connect(journal.path) as connection:
        connection.executemany(
            f"INSERT INTO {JOURNAL_TABLE} (run_id, seq, payload) VALUES ('r', ?, ?)", rows
        )
    return journal


async def test_a_database_journal_reads_ranges_itself(tmp_path: Path) -> None:
    journal = await _journal(tmp_path, [(1, _line(1, "turn/start"))])
    try:
        assert isinstance(journal, RangeReader)
    finally:
        await journal.close()


async def test_a_row_of_another_type_in_another_key_order_is_read_and_left_out(
    tmp_path: Path,
) -> None:
    # Its start does not show its type (another writer's key order): only its parse can tell.
    rows = [
        (1, _line(1, "turn/start")),
        (2, _line(2, "turn/end", type_first=False)),
        (3, _line(3, "turn/start", type_first=False)),
    ]
    journal = await _journal(tmp_path, rows)
    try:
        found = await journal.read_range("r", 1, None, types={"turn/start"})
    finally:
        await journal.close()
    assert [(event.seq, event.type) for event in found] == [(1, "turn/start"), (3, "turn/start")]


async def test_a_row_of_a_type_not_asked_for_is_not_parsed(tmp_path: Path) -> None:
    # Its start shows its type: a torn or damaged rest is never read (as a JSONL range read).
    rows = [(1, _line(1, "turn/start")), (2, '{"type":"turn/end","seq":2,"timest')]
    journal = await _journal(tmp_path, rows)
    try:
        found = await journal.read_range("r", 1, 2, types={"turn/start"})
        with pytest.raises(JournalCorruptError):
            await journal.read_range("r", 1, 2)
    finally:
        await journal.close()
    assert [event.seq for event in found] == [1]


async def test_a_row_that_does_not_parse_is_an_error_naming_the_run_and_seq(
    tmp_path: Path,
) -> None:
    journal = await _journal(tmp_path, [(1, _line(1, "turn/start")), (2, "{not json")])
    try:
        with pytest.raises(JournalCorruptError) as caught:
            await journal.read_range("r", 1, 5, types={"turn/start"})
    finally:
        await journal.close()
    assert "run 'r' seq 2" in str(caught.value)
    assert caught.value.line == 2


async def test_a_row_whose_payload_names_another_key_is_an_error_naming_the_row(
    tmp_path: Path,
) -> None:
    journal = await _journal(tmp_path, [(4, _line(3, "turn/start"))])
    try:
        with pytest.raises(JournalCorruptError) as caught:
            await journal.read_range("r", 1)
    finally:
        await journal.close()
    assert "run 'r' seq 4" in str(caught.value)
    assert "the payload is run 'r' seq 3" in str(caught.value)


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ("{not json", "json"),
        (  # a mark of another run stored under this run's key
            '{"runId":"other","seq":2,"taskId":"t","agentName":"x","callId":"c"}',
            "the mark is run 'other'",
        ),
    ],
)
async def test_a_dispatch_mark_row_that_does_not_read_back_is_an_error(
    tmp_path: Path, payload: str, named: str
) -> None:
    # A mark is what keeps an unsafe call from running twice: a damaged one is never skipped.
    journal = await _journal(tmp_path, [(2, _line(2, "tool/call"))])
    try:
        await journal.mark(
            DispatchMark(run_id="r", seq=2, task_id="t", agent_name="x", call_id="c")
        )
        assert [m.call_id for m in await journal.marks_of("r")] == ["c"]
        with sqlite3.connect(journal.path) as connection:
            connection.execute(f"UPDATE {MARKS_TABLE} SET payload = ?", (payload,))
        with pytest.raises(JournalCorruptError, match=named):
            await journal.marks_of("r")
    finally:
        await journal.close()
