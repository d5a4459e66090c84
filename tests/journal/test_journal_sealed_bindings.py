"""EncryptingJournal: every readable base field is bound into the seal, and the key proof is
not cut short by an event of an older key or by a journal that could not be read.

``test_journal_encrypting`` forges the run id, the type and the agent; the fields below were
held only by accident (two test events never shared a timestamp) or not at all.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors.errors import CorruptStoreError, StoreError
from oma_actors.journal import InMemoryRunJournal, JournalEvent
from oma_actors.journal.encrypting import SEALED_FIELD, EncryptingJournal
from oma_actors.stores.keyring import KeyMismatchError, KeyRing

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

RIGHT = bytes(range(32))
WRONG = bytes(range(100, 132))
OTHER = bytes(range(50, 82))
RING = KeyRing({"k1": RIGHT}, active="k1")
TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"


def event(seq: int, run_id: str = "r1", **fields: Any) -> JournalEvent:
    return JournalEvent(
        seq=seq, type="tool/result", run_id=run_id, attempt=1, timestamp_unix_ms=1_700_000_000_000,
        task_id="task-1", agent_name="w", data={"output": f"output {seq}"}, **fields,
    )  # fmt: skip


async def sealed(events: list[JournalEvent], ring: KeyRing = RING) -> list[JournalEvent]:
    """The events as the inner journal holds them after a sealed append."""
    inner = InMemoryRunJournal()
    await EncryptingJournal(inner, ring).append(events)
    return await inner.read_from(0)


async def read_back(events: list[JournalEvent]) -> list[JournalEvent]:
    inner = InMemoryRunJournal()
    await inner.append(events)
    return await EncryptingJournal(inner, RING).read_from(0)


async def test_two_events_of_one_millisecond_swapped_between_seqs_fail_closed() -> None:
    """Holds the seq in the associated data: a batch appended within one millisecond gives its
    events one timestamp, so only the seq tells their seals apart."""
    a, b = await sealed([event(1), event(2)])
    assert a.timestamp_unix_ms == b.timestamp_unix_ms
    swapped = [replace(a, data=b.data), replace(b, data=a.data)]
    with pytest.raises(CorruptStoreError, match="authentication failed") as caught:
        await read_back(swapped)
    assert "event seq 1" in str(caught.value)


EDITS: dict[str, Callable[[JournalEvent], JournalEvent]] = {
    "attempt": lambda e: replace(e, attempt=2),
    "timestamp": lambda e: replace(e, timestamp_unix_ms=e.timestamp_unix_ms + 1),
    "task": lambda e: replace(e, task_id="task-2"),
    "untasked": lambda e: replace(e, task_id=None),
    "lineage": lambda e: replace(e, source_event_seqs=[7]),
    "lineage-dropped": lambda e: replace(e, source_event_seqs=None),
    "trace": lambda e: replace(e, trace_id="f" * 32),
    "span": lambda e: replace(e, span_id="e" * 16),
    "trace-dropped": lambda e: replace(e, trace_id=None, span_id=None),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
async def test_an_edited_base_field_fails_authentication(edit: str) -> None:
    """Holds each readable base field in the associated data (attempt, timestamp, task id,
    source event seqs, trace and span ids): an event whose field was edited on disk fails
    closed like a flipped byte."""
    [stored] = await sealed([event(1, trace_id=TRACE, span_id=SPAN, source_event_seqs=[0])])
    assert (await read_back([stored]))[0].data == {"output": "output 1"}
    with pytest.raises(CorruptStoreError, match="authentication failed"):
        await read_back([EDITS[edit](stored)])


@pytest.mark.parametrize(
    ("sealed_with", "forged"),
    [
        ({"trace_id": TRACE}, {"trace_id": "f" * 32}),
        ({"span_id": SPAN}, {"span_id": "e" * 16}),
        ({}, {"trace_id": TRACE, "span_id": SPAN}),
    ],
    ids=["trace-only", "span-only", "added"],
)
async def test_a_trace_or_span_id_alone_is_bound_too(
    sealed_with: dict[str, Any], forged: dict[str, Any]
) -> None:
    """Holds the trace binding's condition: the ids are bound when either is present, not only
    when both are, and an event sealed without them does not open with them added."""
    [stored] = await sealed([event(1, **sealed_with)])
    with pytest.raises(CorruptStoreError, match="authentication failed"):
        await read_back([replace(stored, **forged)])


async def test_an_event_of_an_older_key_opened_proves_nothing_of_the_active_key() -> None:
    """Holds ``open``'s ``sealed_by_active`` condition: only an event sealed under the active
    id proves the active key. Reading a run sealed under a rotated-out key must not let a
    wrong key with the active id append where events under that id already exist."""
    inner = InMemoryRunJournal()
    await EncryptingJournal(inner, KeyRing({"k1": RIGHT}, active="k1")).append(
        [event(1, "old-run")]
    )
    rotated = KeyRing({"k2": OTHER, "k1": RIGHT}, active="k2")
    await EncryptingJournal(inner, rotated).append([event(1, "mid-run")])
    before = await inner.read_from(0)

    wrong = EncryptingJournal(inner, KeyRing({"k2": WRONG, "k1": RIGHT}, active="k2"))
    assert [e.data for e in await wrong.read_run("old-run")] == [{"output": "output 1"}]
    with pytest.raises(KeyMismatchError, match="run 'mid-run' event seq 1"):
        await wrong.append([event(1, "new-run")])
    assert await inner.read_from(0) == before
    # The rightful k2 still appends.
    await EncryptingJournal(inner, rotated).append([event(1, "new-run")])
    assert len(await inner.read_from(0)) == len(before) + 1


class DownJournal(InMemoryRunJournal):
    """A journal whose reads and appends fail while ``down`` (a database that is away)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise StoreError("the journal's database is down")

    async def read_from(self, seq: int) -> list[JournalEvent]:
        self._check()
        return await super().read_from(seq)

    async def read_run(self, run_id: str, seq: int = 0) -> list[JournalEvent]:
        self._check()
        return await super().read_run(run_id, seq)

    async def append(self, events: Sequence[JournalEvent]) -> None:
        self._check()
        await super().append(events)


async def test_a_journal_that_could_not_be_read_is_proven_again_by_the_next_wrapper() -> None:
    """Holds ``_prove``'s ``if read`` guard: a proof that read nothing is not remembered on the
    ring, so the next wrapper over the same journal (the sidecar makes one per attempt) reads it
    and refuses a wrong key, instead of appending events nobody else can open."""
    inner = DownJournal()
    await EncryptingJournal(inner, RING).append([event(1, "old-run")])
    before = await inner.read_from(0)
    wrong_ring = KeyRing({"k1": WRONG}, active="k1")
    inner.down = True
    with pytest.raises(StoreError, match="down"):
        await EncryptingJournal(inner, wrong_ring).append([event(1, "new-run")])
    inner.down = False
    with pytest.raises(KeyMismatchError, match="run 'old-run' event seq 1"):
        await EncryptingJournal(inner, wrong_ring).append([event(1, "new-run")])
    assert await inner.read_from(0) == before
    assert SEALED_FIELD in before[0].data
