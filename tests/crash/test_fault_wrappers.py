"""The fault-injecting store wrappers of ``oma_actors.testing.faults`` themselves."""

from __future__ import annotations

from typing import Any

import pytest

from oma_actors.stores import InMemoryStore, MemoryEntry
from oma_actors.stores.base import is_atomic_store, is_memory_store
from oma_actors.testing.faults import CrashingStore, FailingStore, UnknownOutcomeStore

CKPT = "__oma_checkpoint__/r/latest"


class MinimalStore:
    """Only the five required methods: no compare_and_set, no set_with_expiry."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    async def get(self, key: str) -> MemoryEntry | None:
        return None

    async def set(self, key: str, value: str, metadata: Any = None) -> None:
        self.data[key] = value

    async def list(self) -> list[MemoryEntry]:
        return []

    async def delete(self, key: str) -> None:
        self.data.pop(key, None)

    async def clear(self) -> None:
        self.data.clear()


@pytest.mark.parametrize(
    "wrap",
    [
        lambda inner: CrashingStore(inner),
        lambda inner: FailingStore(inner),
        lambda inner: UnknownOutcomeStore(inner, landed=True),
    ],
    ids=["crashing", "failing", "unknown"],
)
def test_optional_methods_are_forwarded_only_when_the_inner_store_has_them(wrap: Any) -> None:
    atomic = wrap(InMemoryStore())
    assert is_memory_store(atomic)
    assert is_atomic_store(atomic)
    assert callable(atomic.set_with_expiry)
    plain = wrap(MinimalStore())
    assert is_memory_store(plain)
    assert not is_atomic_store(plain)
    assert not hasattr(plain, "set_with_expiry")


async def test_crashing_store_delegates_every_call_it_does_not_crash_on() -> None:
    inner = InMemoryStore()
    store = CrashingStore(inner, predicate=lambda key, value: value == {"crash": True})
    await store.set(CKPT, '{"crash": false}')
    await store.set("other/key", '{"crash": true}')  # outside the prefix
    await store.set_with_expiry("x", "y", 3)
    assert await store.compare_and_set("cas", None, "v") is True
    entry = await store.get(CKPT)
    assert entry is not None
    assert entry.value == '{"crash": false}'
    assert store.matched == 0
    assert store.fired == 0
    assert [e.key for e in await store.list()] == [CKPT, "other/key", "x", "cas"]


@pytest.mark.parametrize(
    "kwargs",
    [{"when": "later"}, {"nth": 0}, {"op": "flush"}],
)
def test_crashing_store_rejects_bad_options(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        CrashingStore(InMemoryStore(), **kwargs)


async def test_failing_store_fails_the_nth_matching_calls_without_writing() -> None:
    inner = InMemoryStore()
    store = FailingStore(inner, nth=2, times=2)
    outcomes = []
    for index in range(5):
        try:
            await store.set(CKPT, str(index))
            outcomes.append("ok")
        except ConnectionError:
            outcomes.append("failed")
    assert outcomes == ["ok", "failed", "failed", "ok", "ok"]
    assert (store.matched, store.fired) == (5, 2)
    assert (await inner.get(CKPT)).value == "4"  # type: ignore[union-attr]
    await store.set("not/checkpoint", "x")  # never watched
    assert store.matched == 5


async def test_failing_store_forever_and_on_reads() -> None:
    inner = InMemoryStore()
    await inner.set(CKPT, "v")
    reads = FailingStore(inner, op="get", exc_factory=lambda: OSError("read failed"))
    with pytest.raises(OSError, match="read failed"):
        await reads.get(CKPT)
    assert (await reads.get(CKPT)).value == "v"  # type: ignore[union-attr]
    forever = FailingStore(inner, times=None)
    for _ in range(3):
        with pytest.raises(ConnectionError):
            await forever.set(CKPT, "w")
    assert (await inner.get(CKPT)).value == "v"  # type: ignore[union-attr]


@pytest.mark.parametrize("landed", [True, False])
async def test_unknown_outcome_store_raises_timeout_with_or_without_the_write(
    landed: bool,
) -> None:
    inner = InMemoryStore()
    store = UnknownOutcomeStore(inner, landed=landed, op="compare_and_set")
    with pytest.raises(TimeoutError):
        await store.compare_and_set(CKPT, None, "new")
    stored = await inner.get(CKPT)
    assert (stored.value if stored else None) == ("new" if landed else None)
    await store.set(CKPT, "plain")  # another op: untouched
    assert store.fired == 1
