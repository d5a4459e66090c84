"""Fault-injecting store wrappers for crash and fault tests (crash matrix, sections 3.2 and 3.4).

Each wrapper is a ``MemoryStore`` around another store. It watches the calls of one operation
on keys under one prefix, picks some of them (the ``nth`` matching call, optionally filtered by
a ``predicate`` over the key and the parsed JSON value), and injects a fault there:

- ``CrashingStore`` ends the process with ``os._exit`` before or after delegating, which skips
  ``finally`` blocks, ``atexit`` handlers and buffered I/O exactly as a real crash does.
- ``FailingStore`` raises an exception instead of delegating (the write never happens).
- ``UnknownOutcomeStore`` raises ``TimeoutError`` before delegating (nothing landed) or after
  (the write landed), so the caller cannot tell which.

``compare_and_set``, ``apply`` and ``set_with_expiry`` are forwarded (and watched) only when the
inner store has them, so a wrapper has exactly its inner store's capabilities. An ``apply`` is
watched by its first write under the prefix (its key, and its value or ``None`` for a ``Remove``).
With no watched call, a wrapper behaves exactly as its inner store (and passes its contract).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from oma_actors.keyspace import CHECKPOINT_KEY_PREFIX
from oma_actors.stores.base import Put
from oma_actors.testing.forwarding import CompareAndSet, ForwardingStore, SetWithExpiry

if TYPE_CHECKING:
    import builtins
    from collections.abc import Mapping, Sequence

    from oma_actors.stores.base import Expect, MemoryEntry, MemoryStore, Write

CHECKPOINT_PREFIX = CHECKPOINT_KEY_PREFIX
"""The key prefix of checkpoint snapshots, the default prefix every wrapper watches."""

StoreOp = Literal["get", "set", "set_with_expiry", "compare_and_set", "apply", "delete"]
"""A store operation a wrapper can watch."""

When = Literal["before", "after"]
"""Whether a fault fires before the inner store is called or after it returned."""

Predicate = Callable[[str, Any], bool]
"""``predicate(key, parsed_value)``: the value parsed as JSON, or ``None`` if absent or not JSON."""

_OPS: tuple[str, ...] = ("get", "set", "set_with_expiry", "compare_and_set", "apply", "delete")


def _parse(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


class _FaultStore(ForwardingStore):
    """Delegates every call to ``inner`` and lets subclasses act around the watched ones.

    Attributes:
        inner: The wrapped store.
        matched: How many calls matched the operation, prefix and predicate so far.
        fired: How many times the fault was injected.
    """

    def __init__(
        self,
        inner: MemoryStore,
        *,
        prefix: str,
        op: StoreOp,
        predicate: Predicate | None,
    ) -> None:
        if op not in _OPS:
            raise ValueError(f"op must be one of {', '.join(_OPS)}, not {op!r}")
        super().__init__(inner)
        self.matched = 0
        self.fired = 0
        self._prefix = prefix
        self._op = op
        self._predicate = predicate

    # -- the store surface ------------------------------------------------------------------

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the inner store's entry at ``key`` (watched as op ``"get"``)."""
        self._before("get", key, None)
        entry = await self.inner.get(key)
        self._after("get", key, entry.value if entry is not None else None)
        return entry

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Set ``key`` in the inner store (watched as op ``"set"``)."""
        self._before("set", key, value)
        await self.inner.set(key, value, metadata)
        self._after("set", key, value)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return the inner store's entries, by ``prefix`` if given (never watched)."""
        return await super().list(prefix)

    async def delete(self, key: str) -> None:
        """Delete ``key`` from the inner store (watched as op ``"delete"``)."""
        self._before("delete", key, None)
        await self.inner.delete(key)
        self._after("delete", key, None)

    async def clear(self) -> None:
        """Clear the inner store (never watched)."""
        await self.inner.clear()

    async def _compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        self._before("compare_and_set", key, value)
        written = await super()._compare_and_set(key, expected, value, metadata)
        self._after("compare_and_set", key, value)
        return written

    async def _apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        watched = next((w for w in writes if w.key.startswith(self._prefix)), None)
        if watched is None:
            return await super()._apply(checks, writes)
        value = watched.value if isinstance(watched, Put) else None
        self._before("apply", watched.key, value)
        written = await super()._apply(checks, writes)
        self._after("apply", watched.key, value)
        return written

    async def _set_with_expiry(
        self,
        key: str,
        value: str,
        expires_at_turn: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self._before("set_with_expiry", key, value)
        await super()._set_with_expiry(key, value, expires_at_turn, metadata)
        self._after("set_with_expiry", key, value)

    # -- hooks ------------------------------------------------------------------------------

    def _matches(self, op: StoreOp, key: str, value: str | None) -> bool:
        """Whether this call is watched; counts it in ``matched`` when it is."""
        if op != self._op or not key.startswith(self._prefix):
            return False
        if self._predicate is not None and not self._predicate(key, _parse(value)):
            return False
        self.matched += 1
        return True

    def _before(self, op: StoreOp, key: str, value: str | None) -> None:
        """Called before delegating; may raise (or end the process)."""

    def _after(self, op: StoreOp, key: str, value: str | None) -> None:
        """Called after the inner store returned; may raise (or end the process)."""


class CrashingStore(_FaultStore):
    """Ends the process with ``os._exit(exit_code)`` at one watched store call.

    With ``when="before"`` nothing reaches the inner store; with ``when="after"`` the call has
    completed (for a ``FileStore``: the file is renamed and durable) when the process dies.

    Args:
        inner: The store to wrap.
        prefix: Only keys starting with this prefix are watched.
        nth: Crash on the nth watched call (1-based; default 1). With a ``predicate`` it counts
            only calls the predicate accepts.
        predicate: ``predicate(key, parsed_value) -> bool`` selects the calls to count. The value
            is the value being written (``get``: the stored value when ``when="after"``, else
            ``None``), parsed as JSON. Prefer it to ``nth``: it survives changes in how often
            the runtime saves.
        op: The operation to watch.
        when: ``"before"`` or ``"after"`` delegating.
        exit_code: The process exit code (86 by convention of the crash tests).

    Raises:
        ValueError: An unknown ``op`` or ``when``, or ``nth < 1``.
    """

    def __init__(
        self,
        inner: MemoryStore,
        *,
        prefix: str = CHECKPOINT_PREFIX,
        nth: int | None = None,
        predicate: Predicate | None = None,
        op: StoreOp = "set",
        when: When = "before",
        exit_code: int = 86,
    ) -> None:
        super().__init__(inner, prefix=prefix, op=op, predicate=predicate)
        if when not in ("before", "after"):
            raise ValueError(f"when must be 'before' or 'after', not {when!r}")
        if nth is not None and nth < 1:
            raise ValueError(f"nth must be >= 1, got {nth!r}")
        self._nth = nth if nth is not None else 1
        self._when = when
        self._exit_code = exit_code

    def _before(self, op: StoreOp, key: str, value: str | None) -> None:
        if self._when == "before":
            self._maybe_crash(op, key, value)

    def _after(self, op: StoreOp, key: str, value: str | None) -> None:
        if self._when == "after":
            self._maybe_crash(op, key, value)

    def _maybe_crash(self, op: StoreOp, key: str, value: str | None) -> None:
        if self._matches(op, key, value) and self.matched == self._nth:
            self.fired += 1
            note = f"CrashingStore: os._exit({self._exit_code}) {self._when} {op} {key}\n"
            os.write(2, note.encode("utf-8", "replace"))  # unbuffered: survives the exit
            os._exit(self._exit_code)


class _WindowedFault(_FaultStore):
    """A fault injected on a window of watched calls: ``nth`` and the ``times - 1`` after it.

    With ``times=None`` every watched call from ``nth`` on is affected.
    """

    def __init__(
        self,
        inner: MemoryStore,
        *,
        prefix: str,
        op: StoreOp,
        predicate: Predicate | None,
        nth: int,
        times: int | None,
    ) -> None:
        super().__init__(inner, prefix=prefix, op=op, predicate=predicate)
        if nth < 1:
            raise ValueError(f"nth must be >= 1, got {nth!r}")
        if times is not None and times < 1:
            raise ValueError(f"times must be >= 1 or None, got {times!r}")
        self._nth = nth
        self._times = times

    def _in_window(self, op: StoreOp, key: str, value: str | None) -> bool:
        """Count the call if watched; whether the fault fires on it (then ``fired`` grows)."""
        if not self._matches(op, key, value) or self.matched < self._nth:
            return False
        if self._times is not None and self.matched >= self._nth + self._times:
            return False
        self.fired += 1
        return True


class FailingStore(_WindowedFault):
    """Raises instead of delegating, on some watched calls, without killing the process.

    Args:
        inner: The store to wrap.
        prefix: Only keys starting with this prefix are watched.
        nth: The first watched call that fails (1-based).
        times: How many consecutive watched calls fail from ``nth`` on; ``None`` means all.
        exc_factory: Builds the exception to raise.
        op: The operation to watch.
        predicate: Optionally selects the calls to count, as in ``CrashingStore``.

    Raises:
        ValueError: An unknown ``op``, ``nth < 1`` or ``times < 1``.
    """

    def __init__(
        self,
        inner: MemoryStore,
        *,
        prefix: str = CHECKPOINT_PREFIX,
        nth: int = 1,
        times: int | None = 1,
        exc_factory: Callable[[], BaseException] = lambda: ConnectionError("injected"),
        op: StoreOp = "set",
        predicate: Predicate | None = None,
    ) -> None:
        super().__init__(inner, prefix=prefix, op=op, predicate=predicate, nth=nth, times=times)
        self._exc_factory = exc_factory

    def _before(self, op: StoreOp, key: str, value: str | None) -> None:
        if self._in_window(op, key, value):
            raise self._exc_factory()


class UnknownOutcomeStore(_WindowedFault):
    """Raises ``TimeoutError`` on some watched calls, with the write landed or not.

    With ``landed=True`` the inner call completes first, so the store holds the new value; with
    ``landed=False`` nothing is delegated. Either way the caller only sees the timeout.

    Args:
        inner: The store to wrap.
        landed: Whether the write reaches the inner store before the error.
        prefix: Only keys starting with this prefix are watched.
        nth: The first watched call with an unknown outcome (1-based).
        times: How many consecutive watched calls are affected; ``None`` means all.
        op: The operation to watch.
        predicate: Optionally selects the calls to count, as in ``CrashingStore``.

    Raises:
        ValueError: An unknown ``op``, ``nth < 1`` or ``times < 1``.
    """

    def __init__(
        self,
        inner: MemoryStore,
        *,
        landed: bool,
        prefix: str = CHECKPOINT_PREFIX,
        nth: int = 1,
        times: int | None = 1,
        op: StoreOp = "set",
        predicate: Predicate | None = None,
    ) -> None:
        super().__init__(inner, prefix=prefix, op=op, predicate=predicate, nth=nth, times=times)
        self._landed = landed

    def _before(self, op: StoreOp, key: str, value: str | None) -> None:
        if not self._landed:
            self._maybe_fail(op, key, value)

    def _after(self, op: StoreOp, key: str, value: str | None) -> None:
        if self._landed:
            self._maybe_fail(op, key, value)

    def _maybe_fail(self, op: StoreOp, key: str, value: str | None) -> None:
        if not self._in_window(op, key, value):
            return
        state = "landed" if self._landed else "not written"
        raise TimeoutError(f"injected unknown outcome of {op} {key!r} ({state})")


__all__ = [
    "CHECKPOINT_PREFIX",
    "CompareAndSet",
    "CrashingStore",
    "FailingStore",
    "Predicate",
    "SetWithExpiry",
    "StoreOp",
    "UnknownOutcomeStore",
    "When",
]
