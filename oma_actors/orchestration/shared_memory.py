"""Shared memory: namespaced agent notes over any MemoryStore, hiding reserved keys (spec SM)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oma_actors.clock import to_iso
from oma_actors.errors import CheckpointError, ConfigurationError
from oma_actors.keyspace import is_reserved_key  # SM-01: never expose a key the runtime owns

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from oma_actors.stores.base import MemoryEntry, MemoryStore

_JSON_ENCODING = "json"


@dataclass(frozen=True, slots=True)
class SharedEntry:
    """A visible shared-memory entry with its value decoded."""

    key: str
    agent: str | None
    value: object
    metadata: dict[str, Any] | None


class SharedMemory:
    """The team's notes: ``<agent>/<key>`` entries plus a turn counter (SM-02..SM-07).

    ``on_write`` (agent, key, bytes of the stored value) hears of every ``write`` once it is
    stored: the run's journal records it as ``memory/set`` (spec 17.2).
    """

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.turn_count = 0
        self.on_write: Callable[[str, str, int], None] | None = None
        # The visible entries the last ``snapshot`` held (``None``: none taken yet), so that a
        # change no ``write`` told of (a tool writing to the store itself) can be seen.
        self._snapshotted: list[_Contents] | None = None

    async def write(
        self, agent: str, key: str, value: object, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """Write ``value`` as ``<agent>/<key>``; non-strings are stored as JSON (SM-03).

        Returns:
            the full key written.
        """
        full_key = f"{agent}/{key}"
        if is_reserved_key(full_key):
            raise ConfigurationError(f"shared memory key {full_key!r} uses a reserved prefix")
        meta: dict[str, Any] = {**(metadata or {}), "agent": agent}
        if isinstance(value, str):
            text = value
        else:
            text = json.dumps(value)
            meta["sharedMemoryValueEncoding"] = _JSON_ENCODING
        await self.store.set(full_key, text, meta)
        if self.on_write is not None:
            # Bytes as stored: a lone surrogate (model text may hold one) counts, never raises.
            self.on_write(agent, key, len(text.encode("utf-8", "surrogatepass")))
        return full_key

    async def read(self, full_key: str) -> object | None:
        """The decoded value at ``full_key``; reserved or expired keys read as ``None``."""
        if is_reserved_key(full_key):
            return None
        entry = await self.store.get(full_key)
        if entry is None or self._expired(entry):
            return None
        return _decode(entry)

    async def list_all(self) -> list[SharedEntry]:
        """Every visible entry in insertion order."""
        return [
            SharedEntry(
                key=entry.key,
                agent=(entry.metadata or {}).get("agent"),
                value=_decode(entry),
                metadata=entry.metadata,
            )
            for entry in await self._visible()
        ]

    async def list_by_agent(self, agent: str) -> list[SharedEntry]:
        """Visible entries written by ``agent``."""
        return [entry for entry in await self.list_all() if entry.key.startswith(f"{agent}/")]

    async def summary(self, *, max_chars_per_entry: int = 500) -> str:
        """A readable digest of the visible entries, grouped by agent, for prompts."""
        lines: list[str] = []
        for entry in await self.list_all():
            text = entry.value if isinstance(entry.value, str) else json.dumps(entry.value)
            if len(text) > max_chars_per_entry:
                text = text[:max_chars_per_entry] + "…"
            lines.append(f"- {entry.key}: {text}")
        return "\n".join(lines)

    def advance_turn(self) -> int:
        """Advance the turn counter after a completed task (SM-04); returns the new value."""
        self.turn_count += 1
        return self.turn_count

    async def changed_since_snapshot(self) -> bool:
        """Whether the visible entries differ from those the last ``snapshot`` held (any
        ``created_at`` aside); ``True`` before the first one.

        Tools write to the team's store directly (``Team(shared_memory_store=)``), and no event
        tells of that: a journal-first run asks this after a tool ran, so that the next snapshot
        holds what the tool wrote before a restore puts the store back to a snapshot's view.
        """
        if self._snapshotted is None:
            return True
        return [_contents(entry) for entry in await self._visible()] != self._snapshotted

    async def snapshot(self) -> dict[str, Any]:
        """``{version: 1, turnCount, entries}`` of the visible entries (SM-05)."""
        entries: list[dict[str, Any]] = []
        visible = await self._visible()
        self._snapshotted = [_contents(entry) for entry in visible]
        for entry in visible:
            item: dict[str, Any] = {
                "key": entry.key,
                "value": entry.value,
                "createdAt": to_iso(entry.created_at),
            }
            if entry.metadata is not None:
                item["metadata"] = dict(entry.metadata)
            if entry.expires_at_turn is not None:
                item["expiresAtTurn"] = entry.expires_at_turn
            entries.append(item)
        return {"version": 1, "turnCount": self.turn_count, "entries": entries}

    async def _visible(self) -> list[MemoryEntry]:
        return [
            entry
            for entry in await self.store.list()
            if not is_reserved_key(entry.key) and not self._expired(entry)
        ]

    def _expired(self, entry: MemoryEntry) -> bool:
        return entry.expires_at_turn is not None and self.turn_count >= entry.expires_at_turn


_Contents = tuple[str, str, "Mapping[str, Any] | None", "int | None"]


def _contents(entry: MemoryEntry) -> _Contents:
    return (entry.key, entry.value, entry.metadata, entry.expires_at_turn)


def _decode(entry: MemoryEntry) -> object:
    if (entry.metadata or {}).get("sharedMemoryValueEncoding") == _JSON_ENCODING:
        try:
            decoded: object = json.loads(entry.value)
        except json.JSONDecodeError:
            return entry.value
        return decoded
    return entry.value


def task_result_key(task_id: str) -> str:
    """The key (under the assignee's namespace) where a completed task's output is written."""
    return f"task:{task_id}:result"


async def restore_memory(memory: SharedMemory, snapshot: Mapping[str, Any]) -> None:
    """Replace the visible entries with ``snapshot``'s and set the turn counter (spec SM-06).

    Reserved keys (checkpoints, approvals, run records) are never touched. As in OMA, restored
    entries get a new ``created_at``.

    Raises:
        CheckpointError: the embedded snapshot is not version 1 or is malformed.
    """
    if snapshot.get("version") != 1 or not isinstance(snapshot.get("entries"), list):
        raise CheckpointError("embedded shared-memory snapshot is not version 1 with entries")
    store = memory.store
    for entry in await store.list():
        if not is_reserved_key(entry.key):
            await store.delete(entry.key)
    for item in snapshot["entries"]:
        key, value = item.get("key"), item.get("value")
        if not isinstance(key, str) or not isinstance(value, str) or is_reserved_key(key):
            continue
        metadata = item.get("metadata")
        expires = item.get("expiresAtTurn")
        setter = getattr(store, "set_with_expiry", None)
        if isinstance(expires, int) and callable(setter):
            await setter(key, value, expires, metadata)
        else:
            await store.set(key, value, metadata)
    turn_count = snapshot.get("turnCount")
    memory.turn_count = turn_count if isinstance(turn_count, int) else 0
