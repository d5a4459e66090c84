"""InMemoryStore: a dict-backed store that dies with the process (spec IM)."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from oma_actors.clock import utcnow
from oma_actors.stores.base import MemoryEntry

if TYPE_CHECKING:
    from collections.abc import Mapping


class InMemoryStore:
    """A process-local store with atomic compare-and-set and turn-based expiry.

    Entries live in a ``dict``, so ``list()`` returns them in insertion order and an overwritten key
    keeps its position. ``get`` and ``list`` hand out the stored entries themselves (IM-05); entries
    are frozen, but a caller that mutates ``entry.metadata`` mutates the stored dict.

    It satisfies ``AtomicStore`` and ``ExpiringStore``. Compare-and-set is atomic among every task
    of the event loop because the check and the write happen with no ``await`` between them.
    """

    def __init__(self) -> None:
        """Create an empty store."""
        self._entries: dict[str, MemoryEntry] = {}

    @property
    def size(self) -> int:
        """The number of entries."""
        return len(self._entries)

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key``, or ``None`` when there is none."""
        return self._entries.get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Insert or replace ``key``; an overwrite keeps ``created_at`` and drops any expiry.

        Args:
            key: The entry's key.
            value: The value string.
            metadata: Optional metadata; a shallow copy is stored.
        """
        self._put(key, value, metadata, None)

    async def set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Like ``set``, also recording the turn after which callers treat the entry as expired.

        Args:
            key: The entry's key.
            value: The value string.
            expires_at_turn: The expiry turn; filtering expired entries is the caller's job.
            metadata: Optional metadata; a shallow copy is stored.
        """
        self._put(key, value, metadata, expires_at_turn)

    async def compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write ``value`` only if the current value equals ``expected``.

        Args:
            key: The entry's key.
            expected: The value the caller last saw; ``None`` means "the key must not exist".
            value: The new value.
            metadata: Optional metadata for the new entry; a shallow copy is stored.

        Returns:
            ``True`` if the write happened, ``False`` on a mismatch (nothing changed).
        """
        # No await from here to the write: this is what makes the method atomic.
        current = self._entries.get(key)
        if (current.value if current is not None else None) != expected:
            return False
        self._put(key, value, metadata, None)
        return True

    async def list(self) -> builtins.list[MemoryEntry]:
        """Return every entry in insertion order."""
        return builtins.list(self._entries.values())

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is a no-op."""
        self._entries.pop(key, None)

    async def clear(self) -> None:
        """Remove every entry."""
        self._entries.clear()

    async def has(self, key: str) -> bool:
        """Whether an entry exists at ``key``."""
        return key in self._entries

    async def search(self, query: str) -> builtins.list[MemoryEntry]:
        """Return entries whose key or value contains ``query``, case-insensitively.

        Args:
            query: The substring to look for; an empty query returns every entry.

        Returns:
            Matching entries in insertion order.
        """
        if not query:
            return builtins.list(self._entries.values())
        needle = query.lower()
        return [
            entry
            for entry in self._entries.values()
            if needle in entry.key.lower() or needle in entry.value.lower()
        ]

    def _put(
        self,
        key: str,
        value: str,
        metadata: Mapping[str, Any] | None,
        expires_at_turn: int | None,
    ) -> None:
        previous = self._entries.get(key)
        self._entries[key] = MemoryEntry(
            key=key,
            value=value,
            metadata=dict(metadata) if metadata is not None else None,
            created_at=previous.created_at if previous is not None else utcnow(),
            expires_at_turn=expires_at_turn,
        )
