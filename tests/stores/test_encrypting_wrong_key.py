"""A key with the right id but other bytes seals nothing into a store or a journal that holds
values sealed under that id: ``KeyMismatchError`` before any write, the rightful holder's data
untouched. The proof reads once per store or journal (a value already opened counts), so the
fast path stays a plain write; an empty store, a new key id, or a tampered value among good
ones are no reason to refuse. The first writer under an id leaves a key proof, so a second
writer with other bytes is refused even when the first wrote nothing else yet; stores written
before key proofs (``unproven``) are proven from their values as before.
"""

from __future__ import annotations

import asyncio
import base64
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors.errors import ConfigurationError, StoreError
from oma_actors.journal import InMemoryRunJournal, JournalEvent, JsonlRunJournal
from oma_actors.journal.encrypting import SEALED_FIELD, EncryptingJournal
from oma_actors.keyspace import KEY_PROOF_PREFIX
from oma_actors.stores import Expect, InMemoryStore, Put
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import PREFIX, KeyMismatchError, KeyRing
from oma_actors.testing.forwarding import ForwardingStore

if TYPE_CHECKING:
    import builtins
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from oma_actors.stores.base import MemoryEntry

SECRET = "iban-DE89370400440532013000"
RIGHT = bytes(range(32))
WRONG = bytes(range(100, 132))
OTHER = bytes(range(50, 82))


def ring(key: bytes = RIGHT, key_id: str = "k1", **older: bytes) -> KeyRing:
    return KeyRing({key_id: key, **older}, active=key_id)


class CountingStore(ForwardingStore):
    """Counts the reads that reach the inner store."""

    def __init__(self, inner: InMemoryStore) -> None:
        super().__init__(inner)
        self.reads = 0

    async def get(self, key: str) -> MemoryEntry | None:
        self.reads += 1
        return await super().get(key)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        self.reads += 1
        return await super().list(prefix)


async def seeded(**values: str) -> InMemoryStore:
    inner = InMemoryStore()
    writer = EncryptingStore(inner, ring())
    for key, value in values.items():
        await writer.set(key, value, {"namespace": "test"})
    return inner


async def unproven(inner: InMemoryStore) -> InMemoryStore:
    """``inner`` without its key proofs: a store written before they existed."""
    for entry in await inner.list(prefix=KEY_PROOF_PREFIX):
        await inner.delete(entry.key)
    return inner


async def raw(store: InMemoryStore) -> dict[str, str]:
    return {entry.key: entry.value for entry in await store.list()}


WRITES: dict[str, Callable[[EncryptingStore], Awaitable[object]]] = {
    "set": lambda s: s.set("__oma_run__/new", SECRET),
    "compare_and_set": lambda s: s.compare_and_set("__oma_run__/new", None, SECRET),
    "apply": lambda s: s.apply([Expect("__oma_run__/new", None)], [Put("__oma_run__/new", SECRET)]),
    "set_with_expiry": lambda s: s.set_with_expiry("__oma_run__/new", SECRET, 9),
}


@pytest.mark.parametrize("proof", ["key proof", "values only"])
@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_wrong_key_with_the_same_id_writes_nothing(write: str, proof: str) -> None:
    inner = await seeded(**{"__oma_checkpoint__/r/latest": "snapshot", "worker/note": "n"})
    if proof == "values only":
        await unproven(inner)
    before = await raw(inner)
    wrong = EncryptingStore(inner, ring(WRONG))
    with pytest.raises(KeyMismatchError) as caught:
        await WRITES[write](wrong)
    assert await raw(inner) == before
    assert isinstance(caught.value, ConfigurationError)
    assert caught.value.key_id == "k1"
    message = str(caught.value)
    assert "key id 'k1'" in message
    tried = "__oma_key__/k1" if proof == "key proof" else "__oma_checkpoint__/r/latest"
    assert f"encrypted entry '{tried}'" in message  # the value it tried
    assert base64.b64encode(WRONG).decode() not in message
    assert WRONG.hex() not in message
    # Every later write is refused too, without reading the store again.
    with pytest.raises(KeyMismatchError):
        await wrong.set("x", "y")
    assert await raw(inner) == before


async def test_values_only_outside_the_runtime_prefixes_are_found_by_the_full_listing() -> None:
    inner = await unproven(await seeded(**{"team/memory": "m"}))
    with pytest.raises(KeyMismatchError, match="'team/memory'"):
        await EncryptingStore(inner, ring(WRONG)).set("other", "v")
    assert list(await raw(inner)) == ["team/memory"]


async def test_a_second_writer_with_other_bytes_is_refused_on_a_store_the_first_just_began() -> (
    None
):
    inner = InMemoryStore()
    await EncryptingStore(inner, ring()).set("__oma_run__/a", SECRET)
    before = await raw(inner)
    assert list(before) == ["__oma_key__/k1", "__oma_run__/a"]
    with pytest.raises(KeyMismatchError, match="'__oma_key__/k1'"):
        await EncryptingStore(inner, ring(WRONG)).set("__oma_run__/b", SECRET)
    assert await raw(inner) == before
    # The key proof is the wrapper's own: its listings leave it out.
    assert [e.key for e in await EncryptingStore(inner, ring()).list()] == ["__oma_run__/a"]


async def test_of_two_writers_racing_on_an_empty_store_one_creates_the_proof_and_one_is_refused() -> (
    None
):
    inner = InMemoryStore()
    right, wrong = EncryptingStore(inner, ring()), EncryptingStore(inner, ring(WRONG))
    outcomes = await asyncio.gather(
        right.set("__oma_run__/a", "a"), wrong.set("__oma_run__/b", "b"), return_exceptions=True
    )
    refused = [o for o in outcomes if isinstance(o, KeyMismatchError)]
    assert len(refused) == 1
    # Whichever won, every stored value opens with the winner's key and the loser wrote none.
    winner = ring() if refused[0] is outcomes[1] else ring(WRONG)
    assert len(await EncryptingStore(inner, winner).list()) == 1


class RivalCreatesTheProofMeanwhile(ForwardingStore):
    """Hides the key proof a rival holds until this writer tries to create its own: the rival
    created it after this writer's proof read the store, before its compare-and-set."""

    def __init__(self, inner: InMemoryStore) -> None:
        super().__init__(inner)
        self.seen = False

    async def get(self, key: str) -> MemoryEntry | None:
        if key.startswith(KEY_PROOF_PREFIX) and not self.seen:
            return None
        return await super().get(key)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        found = await super().list(prefix)
        return [e for e in found if self.seen or not e.key.startswith(KEY_PROOF_PREFIX)]

    async def _compare_and_set(
        self, key: str, expected: str | None, value: str, metadata: Any = None
    ) -> bool:
        self.seen = self.seen or key.startswith(KEY_PROOF_PREFIX)
        return await super()._compare_and_set(key, expected, value, metadata)


async def test_a_proof_a_rival_created_meanwhile_refuses_the_writer_it_does_not_open_for() -> None:
    rival = InMemoryStore()
    await EncryptingStore(rival, ring()).set("__oma_run__/a", "a")
    await rival.delete("__oma_run__/a")  # the rival has created its proof, nothing else yet
    late = RivalCreatesTheProofMeanwhile(rival)
    before = await raw(rival)
    with pytest.raises(KeyMismatchError, match="'__oma_key__/k1'"):
        await EncryptingStore(late, ring(WRONG)).set("__oma_run__/b", "b")
    assert late.seen  # refused after losing the creation, not by the proof read
    assert await raw(rival) == before
    # The same race with the rival's own bytes: the proof opens, the write lands.
    await EncryptingStore(RivalCreatesTheProofMeanwhile(rival), ring()).set("__oma_run__/c", "c")


async def test_the_key_proof_is_not_written_when_the_value_cannot_be_sealed() -> None:
    inner = InMemoryStore()
    with pytest.raises(StoreError, match="not valid Unicode"):
        await EncryptingStore(inner, ring()).set("a", "\ud800")
    assert await raw(inner) == {}


async def test_the_right_key_an_empty_store_and_a_new_key_id_write() -> None:
    inner = await seeded(note="n")
    await EncryptingStore(inner, ring()).set("more", SECRET)  # the same bytes: proven
    await EncryptingStore(inner, ring(OTHER, "k2", k1=RIGHT)).set("newer", SECRET)  # a new id
    await EncryptingStore(InMemoryStore(), ring(WRONG)).set("first", SECRET)  # nothing to doubt
    values = {
        e.key: e.value for e in await EncryptingStore(inner, ring(OTHER, "k2", k1=RIGHT)).list()
    }
    assert values == {"note": "n", "more": SECRET, "newer": SECRET}


async def test_a_tampered_value_beside_good_ones_does_not_refuse_the_right_key() -> None:
    inner = await seeded(**{"__oma_run__/a": "a", "__oma_run__/b": "b"})
    tampered = (await raw(inner))["__oma_run__/a"][:-3] + "AAA"
    await inner.set("__oma_run__/a", tampered)
    await EncryptingStore(inner, ring()).set("__oma_run__/c", "c")
    assert (await raw(inner))["__oma_run__/c"].startswith(PREFIX + "k1:")


async def test_the_proof_reads_once_and_a_value_already_opened_needs_no_read() -> None:
    inner = CountingStore(await seeded(note="n", other="o"))
    store = EncryptingStore(inner, ring())
    await store.set("a", "1")
    proof = inner.reads
    assert proof >= 1
    for key in ("b", "c", "d"):
        await store.set(key, key)
    assert inner.reads == proof  # the fast path: no read per write
    # A wrapper made anew over the same store with the same ring remembers the proof.
    await EncryptingStore(inner, store.keyring).set("e", "5")
    assert inner.reads == proof
    # A new ring that has read a value under its key proves nothing more by reading.
    reader = EncryptingStore(inner, ring())
    assert await reader.get("note") is not None
    reads = inner.reads
    await reader.set("f", "6")
    assert inner.reads == reads


def event(seq: int, run_id: str = "old-run", **data: Any) -> JournalEvent:
    return JournalEvent(
        seq=seq, type="turn/start", run_id=run_id, attempt=1, timestamp_unix_ms=seq, data=data
    )


class CountingJournal(InMemoryRunJournal):
    """Counts the reads, or fails them with ``StoreError`` (a journal that cannot be read)."""

    def __init__(self, *, unreadable: bool = False) -> None:
        super().__init__()
        self.reads = 0
        self.unreadable = unreadable

    async def read_from(self, seq: int) -> list[JournalEvent]:
        self.reads += 1
        if self.unreadable:
            raise StoreError("unreadable")
        return await super().read_from(seq)


async def test_a_wrong_key_appends_nothing_to_a_sealed_journal(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    right = EncryptingJournal(JsonlRunJournal(path, flush_interval_ms=0), ring())
    await right.append([event(1, turn=1), event(2, turn=2)])
    await right.close()
    before = path.read_bytes()
    for urgent in (False, True):
        wrong = EncryptingJournal(JsonlRunJournal(path, flush_interval_ms=0), ring(WRONG))
        append = wrong.append_now if urgent else wrong.append
        with pytest.raises(KeyMismatchError) as caught:
            await append([event(1, "new-run", note=SECRET)])
        await wrong.close()
        assert path.read_bytes() == before
        assert f"journal {path} run 'old-run' event seq 1" in str(caught.value)
        assert caught.value.key_id == "k1"
    readable = EncryptingJournal(JsonlRunJournal(path, flush_interval_ms=0), ring())
    assert [e.data for e in await readable.read_from(0)] == [{"turn": 1}, {"turn": 2}]
    await readable.append([event(3, turn=3)])  # the right key still appends
    await readable.close()


async def test_the_journal_proof_reads_once_and_skips_an_unreadable_journal() -> None:
    inner = CountingJournal()
    await EncryptingJournal(inner, ring()).append([event(1, turn=1)])
    journal = EncryptingJournal(inner, ring(OTHER, "k2", k1=RIGHT))  # a new id: nothing to doubt
    await journal.append([event(2, turn=2)])
    reads = inner.reads
    await journal.append([event(3, turn=3)])
    await EncryptingJournal(inner, journal.keyring).append([event(4, turn=4)])
    assert inner.reads == reads  # no read per append, nor for a new wrapper of the same ring
    opened = EncryptingJournal(inner, ring(RIGHT, "k1", k2=OTHER))
    assert len(await opened.read_from(0)) == 4  # an event under its key opened: proven
    reads = inner.reads
    await opened.append([event(5, turn=5)])
    assert inner.reads == reads
    unreadable = CountingJournal(unreadable=True)
    await unreadable.append([replace_sealed(event(1), WRONG)])
    await EncryptingJournal(unreadable, ring()).append([event(2, turn=2)])  # as before: appended
    assert unreadable.size == 2


def replace_sealed(plain: JournalEvent, key: bytes) -> JournalEvent:
    return EncryptingJournal(InMemoryRunJournal(), ring(key)).seal(plain)


async def test_a_journal_with_a_tampered_event_beside_good_ones_takes_the_right_key() -> None:
    inner = InMemoryRunJournal()
    await EncryptingJournal(inner, ring()).append([event(1, turn=1), event(2, turn=2)])
    first = (await inner.read_from(0))[0]
    envelope = first.data[SEALED_FIELD]
    assert isinstance(envelope, str)
    forged = InMemoryRunJournal()
    await forged.append(
        [event(1, **{SEALED_FIELD: envelope[:-3] + "AAA"}), *(await inner.read_from(2))]
    )
    await EncryptingJournal(forged, ring()).append([event(3, turn=3)])
    assert forged.size == 3
    with pytest.raises(KeyMismatchError, match="event seq 1"):
        await EncryptingJournal(forged, ring(WRONG)).append([event(4, turn=4)])
    assert forged.size == 3
