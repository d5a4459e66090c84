"""Entry semantics as pure functions, shared by every embedded backend (spec MS-04, MS-05).

What a write leaves behind is decided here once: an overwrite keeps the entry's ``created_at``,
the caller's metadata is copied (a later mutation by the caller must not reach the store), and
the expiry is the one given (so a plain ``set`` drops an earlier expiry). ``InMemoryStore`` and
``FileStore`` differ only in where the entries live and how a change becomes durable.

``plan_writes`` turns a batch of ``Put``/``Remove`` into the changes it makes without touching
the entries, so a store can validate every new entry (``FileStore``: is it encodable?) before it
changes anything, and then ``commit`` them with no ``await`` in between.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oma_actors.stores.base import MemoryEntry, Remove

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from datetime import datetime

    from oma_actors.stores.base import Expect, Write

Change = tuple[str, MemoryEntry | None]
"""One planned change: the key and its new entry, or ``None`` to delete it."""


def make_entry(
    previous: MemoryEntry | None,
    key: str,
    value: str,
    metadata: Mapping[str, Any] | None,
    *,
    now: datetime,
    expires_at_turn: int | None = None,
) -> MemoryEntry:
    """The entry a write of ``key`` leaves when ``previous`` is the entry it replaces.

    Args:
        previous: The current entry at ``key``, or ``None`` when there is none.
        key: The entry's key.
        value: The new value.
        metadata: The caller's metadata; a shallow copy is stored.
        now: The time of the write, used as ``created_at`` only for a new key.
        expires_at_turn: The expiry of the new entry; ``None`` (a plain write) drops any expiry.

    Returns:
        The new entry, whose ``created_at`` is ``previous.created_at`` on an overwrite.
    """
    return MemoryEntry(
        key=key,
        value=value,
        metadata=dict(metadata) if metadata is not None else None,
        created_at=previous.created_at if previous is not None else now,
        expires_at_turn=expires_at_turn,
    )


def checks_hold(entries: Mapping[str, MemoryEntry], checks: Iterable[Expect]) -> bool:
    """Whether every check holds: its key holds its value, or is absent when it expects ``None``."""
    for check in checks:
        current = entries.get(check.key)
        if (current.value if current is not None else None) != check.value:
            return False
    return True


def plan_writes(
    entries: Mapping[str, MemoryEntry], writes: Sequence[Write], *, now: datetime
) -> list[Change]:
    """The changes ``writes`` make to ``entries``, in order, without applying them.

    Each write sees the ones before it, so ``[Remove(k), Put(k, v)]`` gives ``k`` a new
    ``created_at`` exactly as ``delete`` then ``set`` would. Removing a missing key changes
    nothing and is left out.

    Args:
        entries: The current entries (not modified).
        writes: The batch, in order.
        now: The time of the batch; every new key of one batch gets the same ``created_at``.

    Returns:
        ``(key, entry)`` pairs to apply in order; ``entry`` is ``None`` for a deletion.
    """
    overlay: dict[str, MemoryEntry | None] = {}
    changes: list[Change] = []
    for write in writes:
        previous = overlay[write.key] if write.key in overlay else entries.get(write.key)
        if isinstance(write, Remove):
            if previous is None:
                continue
            entry: MemoryEntry | None = None
        else:
            entry = make_entry(previous, write.key, write.value, write.metadata, now=now)
        overlay[write.key] = entry
        changes.append((write.key, entry))
    return changes


def commit(entries: dict[str, MemoryEntry], changes: Iterable[Change]) -> None:
    """Apply planned changes in order; an overwritten key keeps its position in ``entries``."""
    for key, entry in changes:
        if entry is None:
            entries.pop(key, None)
        else:
            entries[key] = entry
