"""``read_journal_tail`` parses the tail with the cyclic collector held off (P5), and puts it back."""

from __future__ import annotations

import gc

import pytest
from fold_support import RUN, entry, event, journaled

from oma_actors.journal.event import JournalEvent
from oma_actors.journal.tail import read_journal_tail


class _Journal:
    """A journal that records whether the collector ran while it was read."""

    def __init__(self, events: list[JournalEvent], error: Exception | None = None) -> None:
        self.events = events
        self.error = error
        self.collector_on_during_read: list[bool] = []

    async def read_run(self, run_id: str, seq: int = 0) -> list[JournalEvent]:
        self.collector_on_during_read.append(gc.isenabled())
        if self.error is not None:
            raise self.error
        return [e for e in self.events if e.run_id == run_id and e.seq >= seq]


async def test_the_tail_parses_with_the_collector_off_and_it_is_back_on_after() -> None:
    assert gc.isenabled()
    journal = _Journal([event(101, "turn/start"), event(102, "turn/end", turn=1)])
    got = await read_journal_tail(journal, journaled(entry()))  # type: ignore[arg-type]
    assert [e.seq for e in got] == [101, 102]
    assert journal.collector_on_during_read == [False]
    assert gc.isenabled()
    assert got[0].run_id == RUN


async def test_a_failed_read_puts_the_collector_back() -> None:
    journal = _Journal([], error=OSError("disk gone"))
    with pytest.raises(OSError, match="disk gone"):
        await read_journal_tail(journal, journaled(entry()))  # type: ignore[arg-type]
    assert journal.collector_on_during_read == [False]
    assert gc.isenabled()
