"""RedactingStore: a store decorator that scrubs secrets from values before they are written (RD).

Shared-memory writes and checkpoint saves persist agent output verbatim, so a secret an agent
prints would survive on disk. Wrapping the durable store closes that gap at the one seam every
write passes through::

    store = RedactingStore(FileStore("run.json"))

Redaction happens on write and is lossy: reads, and any resumed run, see ``[redacted]``. Wrap
every durable store you persist to (RD-10).

The wrapper has no ``compare_and_set``: redaction would change the exact content a durable
approval hash binds, so the attribute is absent (not a stub) and approval gates fail closed on
it (RD-04). ``set_with_expiry`` exists only when the wrapped store has it (RD-03), which is why
``RedactingStore(inner)`` returns an ``ExpiringRedactingStore`` for such a store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast, overload

from oma_actors.errors import ConfigurationError
from oma_actors.stores.base import JsonText, is_memory_store, one_document
from oma_actors.stores.prefix import list_under
from oma_actors.stores.redaction import Redactor

if TYPE_CHECKING:
    import builtins
    import re
    from collections.abc import Mapping, Sequence

    from oma_actors.stores.base import ExpiringStore, MemoryEntry, MemoryStore


def _has_expiry(store: object) -> bool:
    return callable(getattr(store, "set_with_expiry", None))


class RedactingStore:
    """Wraps a store and writes ``redact(value)`` instead of ``value`` (RD-01, RD-02).

    ``get``, ``list``, ``delete`` and ``clear`` pass straight through. Keys and metadata are never
    redacted; metadata is forwarded as given. There is deliberately no ``compare_and_set``, so the
    wrapper is never an ``AtomicStore`` (RD-04). When ``inner`` has a callable
    ``set_with_expiry``, constructing ``RedactingStore(inner)`` returns an
    ``ExpiringRedactingStore``, which adds a redacting ``set_with_expiry``; otherwise the
    attribute is absent, so ``hasattr`` probes stay truthful (RD-03). A subclass keeps its own
    class, so it gets ``set_with_expiry`` only by deriving from ``ExpiringRedactingStore``.

    Args:
        inner: The store that receives the redacted values.
        patterns: Extra patterns (e.g. PII such as emails or national IDs) applied after the
            built-in credential rules; every match becomes ``[redacted]``. A string is compiled
            with no flags; a compiled pattern is used as it is.

    Raises:
        ConfigurationError: ``inner`` is not a store, or a pattern is invalid.
    """

    _inner: MemoryStore
    _redactor: Redactor

    @overload
    def __new__(
        cls, inner: ExpiringStore, *, patterns: Sequence[str | re.Pattern[str]] = ()
    ) -> ExpiringRedactingStore: ...

    @overload
    def __new__(
        cls, inner: MemoryStore, *, patterns: Sequence[str | re.Pattern[str]] = ()
    ) -> RedactingStore: ...

    def __new__(
        cls, inner: MemoryStore, *, patterns: Sequence[str | re.Pattern[str]] = ()
    ) -> RedactingStore:
        """Wrap ``inner``, picking the class whose surface matches its capabilities.

        Everything happens here rather than in ``__init__``, so that type checkers read the
        overloads above and ``RedactingStore(FileStore(path))`` is typed as expiring.
        """
        if not is_memory_store(inner):
            raise ConfigurationError(
                f"RedactingStore needs a store with get/set/list/delete/clear, got {inner!r}"
            )
        expiring = _has_expiry(inner)
        if cls is RedactingStore and expiring:
            cls = ExpiringRedactingStore
        elif issubclass(cls, ExpiringRedactingStore) and not expiring:
            raise ConfigurationError(
                f"ExpiringRedactingStore needs a store with set_with_expiry, got {inner!r}"
            )
        self = object.__new__(cls)
        self._inner = inner
        self._redactor = Redactor(patterns)
        return self

    @property
    def one_document(self) -> bool:
        """Whether the wrapped store is one document (``stores.base.one_document``)."""
        return one_document(self._inner)

    @property
    def inner(self) -> MemoryStore:
        """The wrapped store."""
        return self._inner

    @property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        """The extra patterns it applies after the built-in rules, compiled: a journal beside
        it takes the same (``JsonlRunJournal(path, redact=store.patterns)``)."""
        return self._redactor.patterns

    def _redact(self, value: str) -> str:
        return self._redactor.value(value)

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the wrapped store's entry at ``key`` (values are as redacted on write)."""
        return await self._inner.get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Write ``redact(value)`` at ``key``; the key and metadata are forwarded unchanged.

        Args:
            key: The entry's key, never redacted.
            value: The value; secrets in it are replaced by ``[redacted]`` before the write.
            metadata: Optional metadata, forwarded as given.
        """
        if isinstance(value, JsonText) and value.redacted_by() is self._redactor:
            # Encoded under this store's own rules (``redactor_of``): redacting it again would
            # parse, walk and encode the whole value a second time for the same text.
            await self._inner.set(key, value, metadata)
            return
        await self._inner.set(key, self._redact(value), metadata)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return the wrapped store's entries (with ``prefix``: whose key starts with it)."""
        return await list_under(self._inner, prefix)

    async def delete(self, key: str) -> None:
        """Remove ``key`` from the wrapped store."""
        await self._inner.delete(key)

    async def clear(self) -> None:
        """Remove every entry of the wrapped store."""
        await self._inner.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inner!r})"


def redactor_of(store: object) -> Redactor | None:
    """The rules ``store`` applies on write: a ``RedactingStore``'s, or those a wrapper over one
    applies for it (its ``redactor``: an ``EncryptingStore`` redacts before it seals), else
    ``None``.

    A producer that encodes its values itself (the checkpoint codec) redacts as it encodes with
    them and hands over a ``JsonText`` whose ``redacted_by()`` is this redactor, which the
    store then writes as it is: one serialization per save instead of three.
    """
    if isinstance(store, RedactingStore):
        return store._redactor
    found = getattr(store, "redactor", None)
    return found if isinstance(found, Redactor) else None


class ExpiringRedactingStore(RedactingStore):
    """A ``RedactingStore`` over a store with ``set_with_expiry``, which it forwards (RD-03).

    ``RedactingStore(inner)`` returns this class by itself when ``inner`` can expire entries;
    naming it is only needed in type annotations.

    Raises:
        ConfigurationError: ``inner`` has no callable ``set_with_expiry``.
    """

    async def set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Like ``set``, also forwarding ``expires_at_turn`` to the wrapped store.

        Args:
            key: The entry's key, never redacted.
            value: The value; secrets in it are replaced by ``[redacted]`` before the write.
            expires_at_turn: The expiry turn, forwarded unchanged.
            metadata: Optional metadata, forwarded as given.
        """
        inner = cast("ExpiringStore", self._inner)
        await inner.set_with_expiry(key, self._redact(value), expires_at_turn, metadata)


__all__ = ["ExpiringRedactingStore", "RedactingStore", "redactor_of"]
