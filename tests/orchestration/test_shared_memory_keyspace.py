"""Shared memory never exposes, snapshots or restores the runtime's reserved keys."""

from __future__ import annotations

import pytest

from oma_actors import CheckpointError, ConfigurationError
from oma_actors.keyspace import RESERVED_PREFIXES, is_reserved_key
from oma_actors.orchestration.shared_memory import SharedMemory, restore_memory
from oma_actors.stores.memory import InMemoryStore


@pytest.mark.parametrize("prefix", RESERVED_PREFIXES)
async def test_reserved_keys_stay_out_of_shared_memory(prefix: str) -> None:
    store = InMemoryStore()
    await store.set(prefix + "run-1/record", "runtime-owned")
    memory = SharedMemory(store)
    await memory.write("writer", "notes", "shared")
    assert [entry.key for entry in await memory.list_all()] == ["writer/notes"]
    snapshot = await memory.snapshot()
    assert all(not is_reserved_key(entry["key"]) for entry in snapshot["entries"])
    await restore_memory(memory, {**snapshot, "entries": []})
    # The restore replaced the visible entries only: the runtime's record is untouched.
    entry = await store.get(prefix + "run-1/record")
    assert entry is not None
    assert entry.value == "runtime-owned"


def test_the_sidecar_s_records_are_reserved() -> None:
    assert is_reserved_key("__oma_sidecar__/run/r1")
    assert not is_reserved_key("agent/__oma_sidecar__/x")


async def test_list_by_agent_gives_one_agents_visible_entries() -> None:
    # OMA's ``listByAgent``: the entries an agent wrote, never another agent's whose name
    # merely starts the same way, never the runtime's reserved keys.
    store = InMemoryStore()
    await store.set(RESERVED_PREFIXES[0] + "writer/record", "runtime-owned")
    memory = SharedMemory(store)
    await memory.write("writer", "notes", "a")
    await memory.write("writer2", "notes", "b")
    await memory.write("writer", "plan", "c")
    assert [e.key for e in await memory.list_by_agent("writer")] == ["writer/notes", "writer/plan"]
    assert await memory.list_by_agent("nobody") == []


@pytest.mark.parametrize("prefix", RESERVED_PREFIXES)
async def test_an_agent_named_like_a_reserved_prefix_cannot_write_under_it(prefix: str) -> None:
    # The full key is "<agent>/<key>": an agent named "__oma_checkpoint__" would otherwise
    # write into the runtime's records (a checkpoint key, an approval row).
    store = InMemoryStore()
    memory = SharedMemory(store)
    agent, _, rest = prefix.rstrip("/").partition("/")
    key = f"{rest}/run-1/latest" if rest else "run-1/latest"
    with pytest.raises(ConfigurationError, match="uses a reserved prefix"):
        await memory.write(agent, key, "forged")
    assert await store.list() == []


@pytest.mark.parametrize(
    "snapshot", [{"version": 2, "entries": []}, {"version": 1}, {"version": 1, "entries": {}}]
)
async def test_a_malformed_embedded_snapshot_is_refused_and_changes_nothing(
    snapshot: dict[str, object],
) -> None:
    store = InMemoryStore()
    memory = SharedMemory(store)
    await memory.write("writer", "notes", "kept")
    with pytest.raises(CheckpointError, match="not version 1 with entries"):
        await restore_memory(memory, snapshot)
    assert [entry.key for entry in await store.list()] == ["writer/notes"]


async def test_a_change_since_the_last_snapshot_is_seen_whoever_wrote_it() -> None:
    # A journal-first run asks this after a tool ran: True makes its boundary a snapshot, so a
    # write only the store knows of (a tool's own) is held; False keeps the boundary journal-only.
    from oma_actors.orchestration.shared_memory import SharedMemory
    from oma_actors.stores import InMemoryStore

    store = InMemoryStore()
    memory = SharedMemory(store)
    assert await memory.changed_since_snapshot()  # no snapshot yet
    await memory.write("a", "k", "v")
    await memory.snapshot()
    assert not await memory.changed_since_snapshot()
    await store.set("tool/x", "written by a tool")
    assert await memory.changed_since_snapshot()
    await memory.snapshot()
    assert not await memory.changed_since_snapshot()
    await store.set("tool/x", "rewritten")
    assert await memory.changed_since_snapshot()


async def test_a_write_holding_a_lone_surrogate_is_told_with_its_stored_bytes() -> None:
    # With a journal listening (memory/set counts the value's bytes), a task result holding a
    # lone surrogate made the write raise a bare UnicodeEncodeError and the run fail.
    from oma_actors.orchestration.shared_memory import SharedMemory
    from oma_actors.stores import InMemoryStore

    told: list[tuple[str, str, int]] = []
    memory = SharedMemory(InMemoryStore())
    memory.on_write = lambda agent, key, size: told.append((agent, key, size))
    await memory.write("a", "k", "x\ud800")
    assert told == [("a", "k", 4)]
    assert await memory.read("a/k") == "x\ud800"
