"""Why a run keeps no history: ``NoHistoryError`` says so when the run was saved by snapshots.

A leased run on a JSONL journal keeps fenced snapshots (a file append cannot carry the lease's
fence, D11), so it keeps no history; the error names that case rather than only "not journal
first", which reads as a contradiction to a caller who passed a durable journal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from test_journal_fenced import run_leased

from oma_actors.checkpoint import run_history
from oma_actors.errors import NoHistoryError
from oma_actors.journal import JsonlRunJournal

if TYPE_CHECKING:
    from pathlib import Path

    from service_kit import FreshStores


async def test_a_leased_run_on_a_jsonl_journal_is_told_why_it_keeps_no_history(
    tmp_path: Path, fresh_stores: FreshStores
) -> None:
    store = await fresh_stores.sqlite(tmp_path / "state.db")
    journal = JsonlRunJournal(tmp_path / "run.jsonl")
    try:
        result, _ = await run_leased(store, journal, "leased")
    finally:
        await journal.close()
    assert result.success
    with pytest.raises(NoHistoryError, match="saved by snapshots") as caught:
        await run_history(store, "leased")
    assert "run record's database" in str(caught.value)
    with pytest.raises(NoHistoryError) as unknown:
        await run_history(store, "nobody")
    assert "saved by snapshots" not in str(unknown.value)  # no checkpoint: nothing to explain
