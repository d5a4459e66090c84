"""Store protocols: the one small key/value seam everything durable goes through (spec MS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """One stored entry. ``created_at`` is the first-write time, kept on overwrite (MS-04)."""

    key: str
    value: str
    metadata: dict[str, Any] | None
    created_at: datetime
    expires_at_turn: int | None = None


@runtime_checkable
class MemoryStore(Protocol):
    """The required store surface (MS-01). Any object with these five methods is a store."""

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key`` or ``None``."""
        ...

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Insert or replace ``key``; an overwrite keeps the original ``created_at``."""
        ...

    async def list(self) -> list[MemoryEntry]:
        """Return every entry in insertion order."""
        ...

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is a no-op."""
        ...

    async def clear(self) -> None:
        """Remove every entry."""
        ...


@runtime_checkable
class AtomicStore(MemoryStore, Protocol):
    """A store whose compare-and-set is atomic across its writer scope (MS-02)."""

    async def compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write ``value`` only if the current value equals ``expected`` (``None``: key absent).

        Returns:
            ``True`` when the write happened, ``False`` on a mismatch (nothing written).
        """
        ...


@runtime_checkable
class ExpiringStore(MemoryStore, Protocol):
    """A store that can record a turn-based expiry with an entry (MS-03)."""

    async def set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Like ``set``, also recording ``expires_at_turn``."""
        ...


REQUIRED_STORE_METHODS = ("get", "set", "list", "delete", "clear")


def is_memory_store(candidate: object) -> bool:
    """Whether ``candidate`` exposes the five callables of the store contract (MS-01)."""
    return all(callable(getattr(candidate, name, None)) for name in REQUIRED_STORE_METHODS)


def is_atomic_store(candidate: object) -> bool:
    """Whether ``candidate`` is a store with a callable ``compare_and_set`` (MS-02)."""
    return is_memory_store(candidate) and callable(getattr(candidate, "compare_and_set", None))
