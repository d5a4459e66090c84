"""Store protocols: the one small key/value seam everything durable goes through (spec MS).

``MemoryStore`` is the required surface; ``AtomicStore`` (compare-and-set on one key),
``ConditionalStore`` (several checks and several writes as one atomic step) and
``ExpiringStore`` are capabilities a backend may add.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from oma_actors.jsontext import string_literal

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from datetime import datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """One stored entry. ``created_at`` is the first-write time, kept on overwrite (MS-04)."""

    key: str
    value: str
    metadata: dict[str, Any] | None
    created_at: datetime
    expires_at_turn: int | None = None


class JsonText(str):
    """A stored value that is JSON text and can give its own JSON string literal (#25).

    A store whose format keeps values as JSON strings (the FileStore: OMA's state file) would
    escape a whole snapshot again on every save; a value of this type hands over the literal,
    which its producer can build from parts it escaped once (the checkpoint codec escapes each
    message once in a run). Everywhere else it is the ``str`` it is.
    """

    __slots__ = ()

    def json_literal(self) -> str:
        """``json.dumps(self, ensure_ascii=False)``: the quoted, escaped string literal."""
        return string_literal(str(self))

    def redacted_by(self) -> object | None:
        """The redactor (``oma_actors.stores.redaction.Redactor``) whose rules this text was
        encoded under, so the ``RedactingStore`` owning it need not parse and redact it again;
        ``None``: not redacted."""
        return None


@runtime_checkable
class MemoryStore(Protocol):
    """The required store surface (MS-01). Any object with these five methods is a store."""

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key`` or ``None``."""
        ...

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Insert or replace ``key``; an overwrite keeps the original ``created_at``."""
        ...

    async def list(self, prefix: str | None = None) -> list[MemoryEntry]:
        """Return every entry in insertion order; with ``prefix``, only keys that start with it.

        ``prefix`` is plain text, never a pattern: ``%``, ``_``, ``*``, ``?`` and ``[`` match
        only themselves, and ``""`` (like ``None``) lists every entry.
        """
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


@dataclass(frozen=True, slots=True)
class Expect:
    """A check of ``ConditionalStore.apply``: ``key`` holds ``value`` (``None``: key absent).

    A missing key never equals a value, not even ``""``.
    """

    key: str
    value: str | None


@dataclass(frozen=True, slots=True)
class Put:
    """A write of ``ConditionalStore.apply``: set ``key`` as ``set`` would (no expiry)."""

    key: str
    value: str
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Remove:
    """A write of ``ConditionalStore.apply``: delete ``key``; a missing key is a no-op."""

    key: str


Write = Put | Remove
"""One write of ``ConditionalStore.apply``."""


@runtime_checkable
class ConditionalStore(AtomicStore, Protocol):
    """A store that applies several writes atomically, only if several keys hold expected values.

    This is what a fenced write needs: "the run's fencing token is still mine, and the snapshot
    is written" as one step, so a superseded owner's write never lands and it is told so. Its
    atomicity has the same scope as the store's ``compare_and_set``.
    """

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        """Apply ``writes`` in order, as one atomic step, only if every check holds.

        Args:
            checks: What the caller expects; all are compared before anything is written.
            writes: ``Put`` and ``Remove`` in order; a later write to a key wins. An overwrite
                keeps the entry's ``created_at`` and drops its expiry, as ``set`` does.

        Returns:
            ``True`` when every check held and every write happened; ``False`` on any mismatch,
            and then nothing was written.
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


class CompareAndSet(Protocol):
    """The signature of ``AtomicStore.compare_and_set``."""

    async def __call__(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write ``value`` only if the current value equals ``expected``."""
        ...


class Apply(Protocol):
    """The signature of ``ConditionalStore.apply``."""

    async def __call__(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        """Apply ``writes`` atomically only if every check holds."""
        ...


class SetWithExpiry(Protocol):
    """The signature of ``ExpiringStore.set_with_expiry``."""

    async def __call__(
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


def is_conditional_store(candidate: object) -> bool:
    """Whether ``candidate`` is an atomic store with a callable ``apply``."""
    return is_atomic_store(candidate) and callable(getattr(candidate, "apply", None))


WRAPPED_DEPTH = 8
"""How many wrappers ``layers`` looks through (a chain is a handful deep; a cycle ends here)."""


def layers(candidate: object) -> Iterator[object]:
    """``candidate`` and what it wraps, outermost first: each wrapper (``EncryptingStore``,
    ``RedactingStore``, ``EncryptingJournal``, ...) names what it wraps ``inner``."""
    for _ in range(WRAPPED_DEPTH):
        if candidate is None:
            return
        yield candidate
        candidate = getattr(candidate, "inner", None)


def one_document(store: object) -> bool:
    """Whether ``store`` keeps every entry in one document that each load and each write
    handles whole (a ``FileStore``, also behind an encrypting or redacting wrapper): there a
    key kept costs every later restore and write, where a database row or a memory key costs
    its bytes once. Any other store (one without a ``one_document`` of its own) is not."""
    return getattr(store, "one_document", False) is True
