"""The runner and helpers shared by the store contract modules (no pytest dependency)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, TypeVar, cast

from oma_actors.stores.base import MemoryStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from oma_actors.stores.base import MemoryEntry

S = TypeVar("S", bound=MemoryStore)

TICK = 0.01
"""Longer than the millisecond precision of OMA's file format, so an overwrite that wrongly
resets ``created_at`` is visible on every backend."""


def expect(condition: bool, message: str) -> None:
    """Raise ``AssertionError(message)`` unless ``condition``.

    Not ``assert``: the checks must still run under ``python -O``.
    """
    if not condition:
        raise AssertionError(message)


async def made(value: S | Awaitable[S]) -> S:
    """The store a sync or async factory returned."""
    return await value if inspect.isawaitable(value) else value


def check_name(check: Callable[..., object]) -> str:
    """The rule a check function states, for failure messages (``functools.partial`` too)."""
    name = getattr(check, "__name__", None) or getattr(getattr(check, "func", None), "__name__", "")
    return str(name).lstrip("_") or repr(check)


async def run_checks(
    suite: str,
    make_store: Callable[[], S | Awaitable[S]],
    checks: Sequence[Callable[[S], Awaitable[None]]],
) -> None:
    """Run every check on its own fresh, empty store; a failure names the suite and the check.

    Raises:
        AssertionError: ``make_store()`` returned a non-empty store, or a check failed.
    """
    for check in checks:
        store = await made(make_store())
        expect(not await store.list(), f"{suite}: make_store() must return an empty store")
        try:
            await check(store)
        except AssertionError as exc:
            raise AssertionError(f"{suite}: {check_name(check)}: {exc}") from exc


async def keys_of(store: MemoryStore) -> list[str]:
    """The keys of ``store.list()``, in order."""
    return [entry.key for entry in await store.list()]


async def entry_of(store: MemoryStore, key: str) -> MemoryEntry:
    """The entry at ``key``, which a write must have left there."""
    entry = await store.get(key)
    expect(entry is not None, f"get({key!r}) returned None after a write")
    return cast("MemoryEntry", entry)


async def value_of(store: MemoryStore, key: str) -> str | None:
    """The value at ``key``, or ``None`` when the key is absent."""
    entry = await store.get(key)
    return entry.value if entry is not None else None
