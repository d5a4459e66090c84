"""Store fakes for tests: a minimal user store, a recording wrapper and a read rendezvous.

Each fake is a real store: it keeps entries with the runtime's own entry semantics (it is backed
by ``InMemoryStore`` or wraps another store), so it passes the store contract, and a test
exercises what it means to rather than a hand-rolled dict. Use them instead of writing a store
class in a test:

- ``MinimalStore``: only the five required methods (no ``compare_and_set``, no expiry), the
  shape of a user's own store; it records every call.
- ``RecordingStore``: wraps any store, keeping its capabilities, and records the writes that
  reached it, how many were in flight at once, and lets a subclass delay a write (``pause``).
- ``RendezvousStore``: while armed, holds reads until ``parties`` of them are waiting, so
  concurrent deciders are proven to have read the same value before either writes.

A store that fails or crashes on chosen calls is in ``oma_actors.testing.faults``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.stores.base import Put
from oma_actors.stores.memory import InMemoryStore
from oma_actors.testing.forwarding import ForwardingStore

if TYPE_CHECKING:
    import builtins
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from oma_actors.clock import Clock
    from oma_actors.stores.base import Expect, MemoryEntry, MemoryStore, Write

CallOp = Literal[
    "get", "set", "list", "delete", "clear", "set_with_expiry", "compare_and_set", "apply"
]
"""The name of a store method a fake recorded."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class StoreCall:
    """One call a fake store saw (or one write a ``RecordingStore`` saw land).

    ``metadata`` is the caller's own object, not a copy, so a test can check identity.
    """

    op: CallOp
    key: str | None = None
    value: str | None = None
    metadata: Mapping[str, Any] | None = None


class MinimalStore:
    """A user-written store in miniature: the five required methods, nothing else.

    It has no ``compare_and_set`` and no ``set_with_expiry``, so it is a ``MemoryStore`` but not
    an ``AtomicStore``: use it to check that a component accepts (or refuses) a plain store.
    Entries are kept by an ``InMemoryStore``, so their semantics are the real ones.

    Args:
        clock: Stamps ``created_at`` of new keys.

    Attributes:
        calls: Every call, in order, as ``StoreCall`` values (``list``/``clear`` carry no key).
    """

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._entries = InMemoryStore(clock=clock)
        self.calls: builtins.list[StoreCall] = []

    @property
    def writes(self) -> builtins.list[StoreCall]:
        """The ``set`` calls, in order."""
        return [call for call in self.calls if call.op == "set"]

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key``, or ``None``."""
        self.calls.append(StoreCall("get", key))
        return await self._entries.get(key)

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Insert or replace ``key``; an overwrite keeps ``created_at``."""
        self.calls.append(StoreCall("set", key, value, metadata))
        await self._entries.set(key, value, metadata)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return every entry in insertion order; with ``prefix``, only keys that start with it.

        The call is recorded with the prefix as its ``key`` (``None`` for a whole listing).
        """
        self.calls.append(StoreCall("list", prefix))
        return await self._entries.list(prefix)

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is a no-op."""
        self.calls.append(StoreCall("delete", key))
        await self._entries.delete(key)

    async def clear(self) -> None:
        """Remove every entry."""
        self.calls.append(StoreCall("clear"))
        await self._entries.clear()


class RecordingStore(ForwardingStore):
    """Wraps a store and records every write that reached it and landed.

    Writes are ``set``, ``set_with_expiry``, a successful ``compare_and_set`` and a successful
    ``apply`` (recorded as one ``StoreCall("apply", key, value, metadata)`` per ``Put`` and
    ``StoreCall("apply", key)`` per ``Remove``). ``delete`` and ``clear`` are forwarded, not
    recorded. Override ``pause`` to delay a write before it reaches the inner store, e.g. to let
    a later write overtake it.

    Args:
        inner: The wrapped store; the wrapper has exactly its capabilities.

    Attributes:
        attempts: How many writes were started (including ones that failed or lost a check).
        writes: The writes that landed, in the order they returned.
        in_flight: Writes started and not yet returned.
        max_in_flight: The most writes ever in flight at once.
    """

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner)
        self.attempts = 0
        self.writes: builtins.list[StoreCall] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def values(self, prefix: str = "") -> builtins.list[str]:
        """The values that landed under keys starting with ``prefix``, in order."""
        return [
            call.value
            for call in self.writes
            if call.value is not None and call.key is not None and call.key.startswith(prefix)
        ]

    async def pause(self, call: StoreCall) -> None:
        """Runs before each write reaches the inner store; a subclass may delay it here."""

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Set ``key`` in the inner store and record it."""
        call = StoreCall("set", key, value, metadata)
        await self._write(call, lambda: self.inner.set(key, value, metadata))

    async def _set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        call = StoreCall("set_with_expiry", key, value, metadata)
        forward = super()._set_with_expiry
        await self._write(call, lambda: forward(key, value, expires_at_turn, metadata))

    async def _compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        call = StoreCall("compare_and_set", key, value, metadata)
        forward = super()._compare_and_set
        return await self._write(call, lambda: forward(key, expected, value, metadata))

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        calls = [
            StoreCall("apply", w.key, w.value, w.metadata)
            if isinstance(w, Put)
            else StoreCall("apply", w.key)
            for w in writes
        ]
        forward = super()._apply
        first = calls[0] if calls else StoreCall("apply")
        return await self._write(first, lambda: forward(checks, writes), calls)

    async def _write(
        self,
        call: StoreCall,
        step: Callable[[], Awaitable[_T]],
        landed: builtins.list[StoreCall] | None = None,
    ) -> _T:
        self.attempts += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.pause(call)
            result = await step()
        finally:
            self.in_flight -= 1
        if result is not False:  # a lost compare_and_set or apply wrote nothing
            self.writes.extend(landed if landed is not None else [call])
        return result


class RendezvousStore(ForwardingStore):
    """While ``armed``, every ``get`` waits until ``parties`` reads are waiting, then all return.

    Each read fetches its entry first and then waits, so the first ``parties`` readers are
    guaranteed to have seen the same value before any of them can write: the race a
    compare-and-set must resolve. After the rendezvous, reads pass straight through.

    Args:
        inner: The wrapped store; the wrapper has exactly its capabilities.
        parties: How many reads meet.

    Attributes:
        armed: Whether reads wait; set it once the setup writes are done.
    """

    def __init__(self, inner: MemoryStore, *, parties: int = 2) -> None:
        super().__init__(inner)
        if parties < 2:
            raise ValueError(f"parties must be >= 2, got {parties!r}")
        self.armed = False
        self._parties = parties
        self._waiting = 0
        self._met = asyncio.Event()

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the inner store's entry, first meeting the other readers when armed."""
        entry = await self.inner.get(key)
        if self.armed and not self._met.is_set():
            self._waiting += 1
            if self._waiting == self._parties:
                self._met.set()
            await self._met.wait()
        return entry


__all__ = ["CallOp", "MinimalStore", "RecordingStore", "RendezvousStore", "StoreCall"]
