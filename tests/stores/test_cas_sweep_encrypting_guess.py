"""An encrypted compare-and-set of the value this instance just wrote skips the read.

A run record is swapped on every renewal: the wrapper guesses the sealed string it wrote last
instead of reading it again (a database round trip). The guess is safe either way (the inner
compare-and-set refuses a stale one); this pins that it is made, for ``compare_and_set`` too.
"""

from __future__ import annotations

from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import MemoryEntry
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import KeyRing
from oma_actors.testing.forwarding import ForwardingStore

RING = KeyRing({"k1": bytes(range(32))}, active="k1")


class _CountingReads(ForwardingStore):
    """Counts the reads of each key."""

    def __init__(self, inner: InMemoryStore) -> None:
        super().__init__(inner)
        self.reads: dict[str, int] = {}

    async def get(self, key: str) -> MemoryEntry | None:
        self.reads[key] = self.reads.get(key, 0) + 1
        return await self.inner.get(key)


async def test_a_compare_and_set_after_this_instances_own_write_reads_nothing() -> None:
    inner = _CountingReads(InMemoryStore())
    store = EncryptingStore(inner, RING)
    assert await store.compare_and_set("record", None, "v1")
    before = inner.reads.get("record", 0)
    assert await store.compare_and_set("record", "v1", "v2")
    assert await store.compare_and_set("record", "v2", "v3")
    assert inner.reads.get("record", 0) == before  # each swap guessed the last write's seal
    got = await store.get("record")
    assert got is not None
    assert got.value == "v3"
    assert not await store.compare_and_set("record", "v2", "v4")  # a real mismatch still reads
