"""ForwardingStore: the base of every wrapping fake in the test kit (faults, recording, gates).

A wrapper must not change what its inner store can do: wrapped around an ``InMemoryStore`` it
is a ``ConditionalStore``, wrapped around a store with only the five required methods it is a
plain ``MemoryStore``. So ``compare_and_set``, ``apply`` and ``set_with_expiry`` are instance
attributes set only when the inner store has them, and ``hasattr`` probes (``is_atomic_store``,
``is_conditional_store``) tell the truth. Subclasses act around a call by overriding the public
required methods or the private ``_compare_and_set`` / ``_apply`` / ``_set_with_expiry``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from oma_actors.stores.base import Apply, CompareAndSet, SetWithExpiry, one_document
from oma_actors.stores.prefix import list_under

if TYPE_CHECKING:
    import builtins
    from collections.abc import Mapping, Sequence

    from oma_actors.stores.base import (
        AtomicStore,
        ConditionalStore,
        Expect,
        ExpiringStore,
        MemoryEntry,
        MemoryStore,
        Write,
    )


class ForwardingStore:
    """A store that forwards every call to ``inner``, with exactly the inner store's capabilities.

    Args:
        inner: The wrapped store.

    Attributes:
        inner: The wrapped store.
        compare_and_set: Present only when ``inner`` has a callable ``compare_and_set``.
        apply: Present only when ``inner`` has a callable ``apply``.
        set_with_expiry: Present only when ``inner`` has a callable ``set_with_expiry``.
    """

    compare_and_set: CompareAndSet
    apply: Apply
    set_with_expiry: SetWithExpiry

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        if callable(getattr(inner, "compare_and_set", None)):
            self.compare_and_set = self._compare_and_set
        if callable(getattr(inner, "apply", None)):
            self.apply = self._apply
        if callable(getattr(inner, "set_with_expiry", None)):
            self.set_with_expiry = self._set_with_expiry

    @property
    def one_document(self) -> bool:
        """Whether the inner store is one document (``stores.base.one_document``)."""
        return one_document(self.inner)

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the inner store's entry at ``key``."""
        return await self.inner.get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Set ``key`` in the inner store."""
        await self.inner.set(key, value, metadata)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return the inner store's entries (with ``prefix``: whose key starts with it)."""
        return await list_under(self.inner, prefix)

    async def delete(self, key: str) -> None:
        """Delete ``key`` from the inner store."""
        await self.inner.delete(key)

    async def clear(self) -> None:
        """Clear the inner store."""
        await self.inner.clear()

    async def _compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        inner = cast("AtomicStore", self.inner)
        return await inner.compare_and_set(key, expected, value, metadata)

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        return await cast("ConditionalStore", self.inner).apply(checks, writes)

    async def _set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        inner = cast("ExpiringStore", self.inner)
        await inner.set_with_expiry(key, value, expires_at_turn, metadata)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


__all__ = ["Apply", "CompareAndSet", "ForwardingStore", "SetWithExpiry"]
