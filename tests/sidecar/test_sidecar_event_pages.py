"""The durable paged event log: a sibling sidecar follows a live run with no gap, at page cost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest
from test_sidecar_registry import new_record

from oma_actors import InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.event_pages import PAGE_SIZE, EventPages, delete_pages, page_key
from sidecar.runs import RunRegistry

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class SizeRecordingStore(InMemoryStore):
    """Records the size of every value written."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[tuple[str, int]] = []

    async def set(self, key: str, value: str, metadata: Mapping[str, Any] | None = None) -> None:
        self.written.append((key, len(value)))
        await super().set(key, value, metadata)

    async def compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        self.written.append((key, len(value)))
        return await super().compare_and_set(key, expected, value, metadata)


@pytest.fixture
async def group() -> AsyncIterator[asyncio.TaskGroup]:
    async with asyncio.TaskGroup() as tasks:
        yield tasks


def log_event(index: int) -> pb.RunEvent:
    event = pb.RunEvent(type="log")
    event.data.fields["n"].number_value = index
    return event


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def test_a_sibling_reads_every_event_of_a_live_run_without_a_gap(
    group: asyncio.TaskGroup,
) -> None:
    store = SizeRecordingStore()
    writer = RunRegistry(store, owner_id="a", spawn=group.create_task, durable_events=True)
    await writer.create(new_record("r1"))
    for index in range(3 * PAGE_SIZE + 5):
        writer.emit("r1", log_event(index))
        if index % 7 == 0:
            await settle()  # flushes interleave with emits: batches of various sizes
    await settle()

    reader = RunRegistry(store, owner_id="b", spawn=group.create_task)
    log = await reader.log_of("r1")
    assert [event.seq for event in log.events] == list(range(1, 3 * PAGE_SIZE + 6))
    assert [event.data.fields["n"].number_value for event in log.events[:3]] == [0, 1, 2]
    # Pages are contiguous and never over full; no write is bigger than a page.
    sizes = [len(json.loads((await store.get(page_key("r1", p))).value)) for p in range(4)]  # type: ignore[union-attr]
    assert sizes == [PAGE_SIZE, PAGE_SIZE, PAGE_SIZE, 5]
    assert await store.get(page_key("r1", 4)) is None
    biggest_page = max(size for key, size in store.written if key == page_key("r1", 0))
    assert max(size for key, size in store.written if "/events/" in key) <= biggest_page * 1.1

    # The reader follows more events cheaply: it re-reads from its last page on.
    for index in range(10):
        writer.emit("r1", log_event(1000 + index))
    await settle()
    await reader.refresh("r1")
    assert [event.seq for event in log.events][-11:] == list(
        range(3 * PAGE_SIZE + 5, 3 * PAGE_SIZE + 16)
    )


async def test_two_writers_of_one_run_never_lose_each_others_events() -> None:
    store = InMemoryStore()
    first, second = EventPages(store, "r1"), EventPages(store, "r1")

    def events(seqs: range) -> list[pb.RunEvent]:
        return [pb.RunEvent(seq=seq, type="log") for seq in seqs]

    await first.append(events(range(1, 40)))
    await second.append(events(range(1025, 1100)))  # adopted: a block above, same last page
    await first.append(events(range(40, 45)))  # a late write of the first one
    reader = EventPages(store, "r1")
    seqs = [event.seq for event in await reader.read_new()]
    assert sorted(seqs) == [*range(1, 45), *range(1025, 1100)]
    assert len(seqs) == len(set(seqs))
    assert await delete_pages(store, "r1") == 2
    assert await store.list() == []


async def test_a_finished_run_in_durable_mode_keeps_no_whole_history_key(
    group: asyncio.TaskGroup,
) -> None:
    store = InMemoryStore()
    writer = RunRegistry(store, owner_id="a", spawn=group.create_task, durable_events=True)
    await writer.create(new_record("r1"))
    writer.emit("r1", log_event(0))
    await writer.set_status("r1", pb.RUN_STATUS_COMPLETED)
    keys = sorted(entry.key for entry in await store.list())
    assert keys == ["__oma_sidecar__/events/r1/0", "__oma_sidecar__/run/r1"]
    reader = RunRegistry(store, owner_id="b", spawn=group.create_task)
    statuses = [event.type for event in (await reader.log_of("r1")).events]
    assert statuses == ["log", "run_status"]
