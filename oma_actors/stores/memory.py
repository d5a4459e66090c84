"""InMemoryStore: a dict-backed store that dies with the process (spec IM)."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.stores.conditional import AppliesConditionally
from oma_actors.stores.entries import checks_hold, commit, make_entry, plan_writes
from oma_actors.stores.prefix import matching

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.clock import Clock
    from oma_actors.stores.base import Expect, MemoryEntry, Write


class InMemoryStore(AppliesConditionally):
    """A process-local store with atomic compare-and-set and turn-based expiry.

    Entries live in a ``dict``, so ``list()`` returns them in insertion order and an overwritten key
    keeps its position. ``get`` and ``list`` hand out the stored entries themselves (IM-05); entries
    are frozen, but a caller that mutates ``entry.metadata`` mutates the stored dict.

    It satisfies ``ConditionalStore`` (so ``AtomicStore``) and ``ExpiringStore``. ``apply`` and
    ``compare_and_set`` are atomic among every task of the event loop because the checks and the
    writes happen with no ``await`` between them.

    Args:
        clock: Stamps ``created_at`` of new keys; a test passes a ``FakeClock``.
    """

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._entries: dict[str, MemoryEntry] = {}
        self._clock = clock

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

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        """Apply ``writes`` in order only if every check holds, as one atomic step.

        Args:
            checks: Each key must hold the given value (``None``: the key must be absent).
            writes: ``Put`` and ``Remove`` in order; an overwrite keeps ``created_at``.

        Returns:
            ``True`` if every check held and the writes happened, ``False`` on a mismatch
            (nothing changed).
        """
        # No await from here to the last write: this is what makes the method atomic.
        if not checks_hold(self._entries, checks):
            return False
        commit(self._entries, plan_writes(self._entries, writes, now=self._clock.now()))
        return True

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return every entry in insertion order; with ``prefix``, only keys that start with it."""
        return matching(self._entries.values(), prefix)

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
        self._entries[key] = make_entry(
            self._entries.get(key),
            key,
            value,
            metadata,
            now=self._clock.now(),
            expires_at_turn=expires_at_turn,
        )
