"""A closed ``JsonlRunJournal`` holds no thread: ``close()`` ends its I/O threads (``IoThread``)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING

from oma_actors.journal import JournalEvent, JsonlRunJournal
from oma_actors.journal.marks import DispatchMark
from oma_actors.stores.io_thread import IoThread

if TYPE_CHECKING:
    from pathlib import Path


def event(run_id: str, seq: int) -> JournalEvent:
    return JournalEvent(
        seq=seq,
        type="turn/start",
        run_id=run_id,
        attempt=1,
        timestamp_unix_ms=1_700_000_000_000 + seq,
        data={"turn": seq},
    )


def threads_of(names: set[str]) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name in names]


async def test_closing_many_journals_ends_their_threads_at_once(tmp_path: Path) -> None:
    journals = [
        JsonlRunJournal(tmp_path / f"run-{i}.jsonl", flush_interval_ms=0) for i in range(20)
    ]
    names = {
        f"oma-{kind}:run-{i}.jsonl{suffix}"
        for i in range(20)
        for kind, suffix in (("journal", ""), ("marks", ".marks"))
    }
    await asyncio.gather(*(j.append([event(f"r{i}", 1)]) for i, j in enumerate(journals)))
    await asyncio.gather(
        *(
            j.mark(DispatchMark(run_id=f"r{i}", seq=1, task_id=None, agent_name=None, call_id="c"))
            for i, j in enumerate(journals)
        )
    )
    assert len(threads_of(names)) == 40  # the journal's thread and its marks file's, each

    await asyncio.gather(*(j.close() for j in journals))

    # Not after the 5 s idle end: gone when close() returned.
    assert threads_of(names) == []


async def test_close_still_writes_and_fsyncs_what_is_pending(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    journal = JsonlRunJournal(path, flush_interval_ms=60_000)  # only close() flushes the batch
    appends = [asyncio.ensure_future(journal.append([event("r", s)])) for s in (1, 2, 3)]
    await asyncio.sleep(0)
    await journal.close()
    assert all(a.done() and a.exception() is None for a in appends)
    assert [e.seq for e in await JsonlRunJournal(path).read_run("r")] == [1, 2, 3]
    assert threads_of({"oma-journal:run.jsonl", "oma-marks:run.jsonl.marks"}) == []


async def test_file_thread_runs_in_order_across_a_close() -> None:
    thread = IoThread("ft-order")
    seen: list[tuple[int, int]] = []

    def record(i: int) -> None:
        time.sleep(0.002 if i < 5 else 0)
        seen.append((i, threading.get_ident()))

    before = [thread.submit(record, i) for i in range(5)]
    closing = asyncio.ensure_future(thread.close())
    await asyncio.sleep(0)
    after = [thread.submit(record, i) for i in range(5, 10)]  # a new thread, after the old one
    await asyncio.gather(*before, *after, closing)
    assert [i for i, _ in seen] == list(range(10))
    assert len({ident for i, ident in seen if i < 5}) == 1
    assert {ident for i, ident in seen if i < 5}.isdisjoint({ident for i, ident in seen if i >= 5})
    await thread.close()
    assert not thread.alive
    assert threads_of({"ft-order"}) == []


async def test_file_thread_close_without_a_thread_and_the_idle_end() -> None:
    thread = IoThread("ft-idle", idle_seconds=0.05)
    await thread.close()  # nothing ran: nothing to end
    assert await thread.submit(lambda: 7) == 7
    for _ in range(200):
        if not thread.alive:
            break
        await asyncio.sleep(0.01)
    assert not thread.alive  # an owner never closed leaks no thread
    await thread.close()
    assert await thread.submit(lambda: 8) == 8
    await thread.close()
    assert threads_of({"ft-idle"}) == []
