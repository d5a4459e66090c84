"""Every store backend, and every wrapping store, runs the same contract (STYLE practice 6).

A backend is a builder ``(tmp_path, fresh_stores) -> factory`` (the factory returns a fresh,
empty store each call, sync or async), the capabilities it claims, and for a durable backend how
to re-open a store over the same state. Each contract runs on every backend that claims its
capability, and ``test_claimed_capabilities_are_the_real_ones`` keeps the claims honest. The
service-backed stores (PostgreSQL, Redis) get a fresh table or key prefix per store, and skip
when their service is unreachable (FAIL under ``CI=true``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import pytest

from oma_actors.stores import (
    FileStore,
    InMemoryStore,
    is_atomic_store,
    is_conditional_store,
    is_memory_store,
)
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import KeyRing
from oma_actors.stores.redacting import RedactingStore
from oma_actors.testing._contract import made
from oma_actors.testing.faults import CrashingStore, FailingStore, UnknownOutcomeStore
from oma_actors.testing.store_contract import (
    check_atomic_store,
    check_conditional_store,
    check_expiring_store,
    check_memory_store,
    check_run_ownership,
)
from oma_actors.testing.stores import MinimalStore, RecordingStore, RendezvousStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from service_kit import FreshStores

    from oma_actors.stores import AtomicStore, ConditionalStore, ExpiringStore, MemoryStore

Capability = Literal["atomic", "expiring", "conditional"]
EVERYTHING: frozenset[Capability] = frozenset({"atomic", "expiring", "conditional"})


@dataclass(frozen=True)
class Backend:
    """How to build one kind of store, what it claims to do, and how to re-open it."""

    build: Callable[[Path], Callable[[], MemoryStore]] | None
    capabilities: frozenset[Capability]
    reopen: Callable[[MemoryStore], MemoryStore] | None = None
    # A service-backed (or closable) store: built through the test's FreshStores instead.
    fresh: Callable[[FreshStores], Callable[[], Awaitable[MemoryStore]]] | None = None
    reopen_fresh: Callable[[FreshStores, MemoryStore], Awaitable[MemoryStore]] | None = None

    def factory(self, tmp_path: Path, stores: FreshStores) -> Callable[[], Any]:
        """The zero-argument store factory of this backend for one test."""
        if self.fresh is not None:
            return self.fresh(stores)
        assert self.build is not None
        return self.build(tmp_path)

    def reopener(self, stores: FreshStores) -> Callable[[Any], Any] | None:
        """How to re-open a store of this backend over its durable state, if it has one."""
        if self.reopen_fresh is not None:
            reopen_fresh = self.reopen_fresh
            return lambda store: reopen_fresh(stores, store)
        return self.reopen


def _files(tmp_path: Path) -> Callable[[], FileStore]:
    numbers = itertools.count()
    return lambda: FileStore(tmp_path / f"store-{next(numbers)}" / "state.json")


def _reopen_file(store: MemoryStore) -> MemoryStore:
    """A second FileStore over the same file: it sees only what is durable."""
    inner: Any = store
    while not isinstance(inner, FileStore):
        inner = inner.inner
    return FileStore(inner.path)


def _never(key: str, value: object) -> bool:
    return False  # an unarmed fault: it watches every call and fires on none


def _memory(tmp_path: Path) -> Callable[[], MemoryStore]:
    return InMemoryStore


def _over(
    inner: Callable[[Path], Callable[[], MemoryStore]], wrap: Callable[[MemoryStore], MemoryStore]
) -> Callable[[Path], Callable[[], MemoryStore]]:
    def build(tmp_path: Path) -> Callable[[], MemoryStore]:
        make = inner(tmp_path)
        return lambda: wrap(make())

    return build


# Two keys, the older one active: values must open under whichever key sealed them.
RING = KeyRing({"k1": bytes(range(32)), "k0": bytes(32)}, active="k1")


def _encrypted(store: MemoryStore) -> MemoryStore:
    return EncryptingStore(store, RING)


def _encrypted_fresh(
    make: Callable[[], Awaitable[MemoryStore]],
) -> Callable[[], Awaitable[MemoryStore]]:
    async def build() -> MemoryStore:
        return EncryptingStore(await make(), RING)

    return build


async def _reopen_encrypted(stores: FreshStores, store: MemoryStore) -> MemoryStore:
    """A second EncryptingStore, with the same keys, over a re-opened inner store."""
    assert isinstance(store, EncryptingStore)
    return EncryptingStore(await stores.reopen(store.inner), RING)


BACKENDS: dict[str, Backend] = {
    "memory": Backend(_memory, EVERYTHING),
    "file": Backend(_files, EVERYTHING, _reopen_file),
    "redacting(memory)": Backend(_over(_memory, RedactingStore), frozenset({"expiring"})),
    "redacting(file)": Backend(_over(_files, RedactingStore), frozenset({"expiring"})),
    "failing(memory)": Backend(
        _over(_memory, lambda s: FailingStore(s, op="apply", predicate=_never)), EVERYTHING
    ),
    "failing(file)": Backend(
        _over(_files, lambda s: FailingStore(s, prefix="", predicate=_never)),
        EVERYTHING,
        _reopen_file,
    ),
    "unknown-outcome(file)": Backend(
        _over(_files, lambda s: UnknownOutcomeStore(s, landed=True, op="apply", predicate=_never)),
        EVERYTHING,
        _reopen_file,
    ),
    "crashing(memory)": Backend(
        _over(_memory, lambda s: CrashingStore(s, op="compare_and_set", predicate=_never)),
        EVERYTHING,
    ),
    "minimal": Backend(lambda tmp_path: MinimalStore, frozenset()),
    "recording(file)": Backend(_over(_files, RecordingStore), EVERYTHING, _reopen_file),
    "rendezvous(memory)": Backend(_over(_memory, RendezvousStore), EVERYTHING),
    "sqlite": Backend(
        None, EVERYTHING, fresh=lambda s: s.sqlite, reopen_fresh=lambda s, st: s.reopen(st)
    ),
    "postgres": Backend(
        None, EVERYTHING, fresh=lambda s: s.postgres, reopen_fresh=lambda s, st: s.reopen(st)
    ),
    "redis": Backend(
        None, EVERYTHING, fresh=lambda s: s.redis, reopen_fresh=lambda s, st: s.reopen(st)
    ),
    "encrypting(memory)": Backend(_over(_memory, _encrypted), EVERYTHING),
    "encrypting(file)": Backend(
        _over(_files, _encrypted), EVERYTHING, lambda store: _encrypted(_reopen_file(store))
    ),
    "encrypting(minimal)": Backend(_over(lambda tmp_path: MinimalStore, _encrypted), frozenset()),
    "encrypting(sqlite)": Backend(
        None,
        EVERYTHING,
        fresh=lambda s: _encrypted_fresh(s.sqlite),
        reopen_fresh=_reopen_encrypted,
    ),
    "encrypting(postgres)": Backend(
        None,
        EVERYTHING,
        fresh=lambda s: _encrypted_fresh(s.postgres),
        reopen_fresh=_reopen_encrypted,
    ),
    "encrypting(redis)": Backend(
        None,
        EVERYTHING,
        fresh=lambda s: _encrypted_fresh(s.redis),
        reopen_fresh=_reopen_encrypted,
    ),
}


def _claiming(capability: Capability | None = None) -> list[Any]:
    return [
        pytest.param(name, id=name)
        for name, backend in BACKENDS.items()
        if capability is None or capability in backend.capabilities
    ]


@pytest.mark.parametrize("name", _claiming())
async def test_claimed_capabilities_are_the_real_ones(
    name: str, tmp_path: Path, fresh_stores: FreshStores
) -> None:
    store = await made(BACKENDS[name].factory(tmp_path, fresh_stores)())
    claimed = BACKENDS[name].capabilities
    assert is_memory_store(store)
    assert is_atomic_store(store) == ("atomic" in claimed)
    assert is_conditional_store(store) == ("conditional" in claimed)
    assert callable(getattr(store, "set_with_expiry", None)) == ("expiring" in claimed)


@pytest.mark.parametrize("name", _claiming())
async def test_memory_store_contract(name: str, tmp_path: Path, fresh_stores: FreshStores) -> None:
    await check_memory_store(BACKENDS[name].factory(tmp_path, fresh_stores))


@pytest.mark.parametrize("name", _claiming("atomic"))
async def test_atomic_store_contract(name: str, tmp_path: Path, fresh_stores: FreshStores) -> None:
    make = cast("Callable[[], AtomicStore]", BACKENDS[name].factory(tmp_path, fresh_stores))
    await check_atomic_store(make)


@pytest.mark.parametrize("name", _claiming("expiring"))
async def test_expiring_store_contract(
    name: str, tmp_path: Path, fresh_stores: FreshStores
) -> None:
    make = cast("Callable[[], ExpiringStore]", BACKENDS[name].factory(tmp_path, fresh_stores))
    await check_expiring_store(make)


@pytest.mark.parametrize("name", _claiming("conditional"))
async def test_conditional_store_contract(
    name: str, tmp_path: Path, fresh_stores: FreshStores
) -> None:
    make = cast("Callable[[], ConditionalStore]", BACKENDS[name].factory(tmp_path, fresh_stores))
    await check_conditional_store(make)


@pytest.mark.parametrize("name", _claiming("conditional"))
async def test_run_ownership_contract(name: str, tmp_path: Path, fresh_stores: FreshStores) -> None:
    backend = BACKENDS[name]
    make = cast("Callable[[], ConditionalStore]", backend.factory(tmp_path, fresh_stores))
    await check_run_ownership(make, reopen=backend.reopener(fresh_stores))


def test_every_durable_backend_is_checked_against_a_reopened_instance() -> None:
    # Without a reopen, "a stale write never lands" is checked only against the writer's own
    # instance, which a store that caches writes locally would pass.
    for name in ("file", "sqlite", "postgres", "redis", "encrypting(file)", "encrypting(sqlite)"):
        assert BACKENDS[name].reopener(cast("FreshStores", None)) is not None, name
