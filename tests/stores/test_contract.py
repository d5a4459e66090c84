"""Every store backend runs the same contract (STYLE practice 6).

A backend is a builder ``(tmp_path) -> factory``; the factory returns a fresh, empty store each
call. Service-backed stores (Redis, Postgres) join ``BACKENDS`` and skip when unavailable.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Protocol

import pytest

from oma_actors.stores import AtomicStore, ExpiringStore, FileStore, InMemoryStore
from oma_actors.testing.store_contract import (
    check_atomic_store,
    check_expiring_store,
    check_memory_store,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


class FullStore(AtomicStore, ExpiringStore, Protocol):
    """What every backend below offers: compare-and-set and turn expiry."""


def _memory(tmp_path: Path) -> Callable[[], FullStore]:
    return InMemoryStore


def _file(tmp_path: Path) -> Callable[[], FullStore]:
    numbers = itertools.count()
    return lambda: FileStore(tmp_path / f"store-{next(numbers)}" / "state.json")


BACKENDS: dict[str, Callable[[Path], Callable[[], FullStore]]] = {
    "memory": _memory,
    "file": _file,
}


@pytest.fixture(params=list(BACKENDS), ids=list(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], FullStore]:
    """A factory of fresh, empty stores of one backend."""
    backend: str = request.param
    return BACKENDS[backend](tmp_path)


async def test_memory_store_contract(store: Callable[[], FullStore]) -> None:
    await check_memory_store(store)


async def test_atomic_store_contract(store: Callable[[], FullStore]) -> None:
    await check_atomic_store(store)


async def test_expiring_store_contract(store: Callable[[], FullStore]) -> None:
    await check_expiring_store(store)
