"""The run registry: compare-and-set updates, typed errors, queries; an attempt's live progress."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from sidecar_helpers import SiblingWritesFirst, run_request

from oma_actors.keyspace import sidecar_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import InMemoryStore, MemoryEntry
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.attempt import Progress
from sidecar.authority import view_of
from sidecar.record import (
    Outcome,
    RunExistsError,
    RunRecordConflictError,
    RunRecordV1,
    RunView,
    TaskRow,
    UnknownRunError,
)
from sidecar.record_codec import decode, encode
from sidecar.runs import RunRegistry

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


def shown(record: RunRecordV1) -> RunView:
    """The view of a run that has no run record, just registered."""
    return view_of(record, None, now=record.updated_at, ttl=10)


def new_record(run_id: str, tenant: str = "") -> RunRecordV1:
    request = run_request(run_id)
    return RunRecordV1(run_id=run_id, request_id=request.request_id, request=request, tenant=tenant)


@pytest.fixture
async def group() -> AsyncIterator[asyncio.TaskGroup]:
    async with asyncio.TaskGroup() as tasks:
        yield tasks


def registry(store: InMemoryStore, group: asyncio.TaskGroup) -> RunRegistry:
    return RunRegistry(store, spawn=group.create_task)


class AlwaysConflicts(InMemoryStore):
    """A store whose compare-and-set always finds another value."""

    async def compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        return expected is None and await super().compare_and_set(key, expected, value, metadata)


async def test_create_reserves_the_first_seqs_and_persists_schema_3(
    group: asyncio.TaskGroup,
) -> None:
    store = InMemoryStore()
    runs = registry(store, group)
    created = await runs.create(new_record("r1"))
    assert created.seq_reserved_until == 1024
    stored = await store.get(sidecar_key("run", "r1"))
    assert stored is not None
    assert json.loads(stored.value)["schema"] == 3
    assert decode(stored.value) == created == await runs.get("r1")
    with pytest.raises(RunExistsError) as caught:
        await runs.create(new_record("r1"))
    assert caught.value.existing == created


async def test_a_refused_create_keeps_the_run_this_process_knows(
    group: asyncio.TaskGroup,
) -> None:
    runs = registry(InMemoryStore(), group)
    await runs.create(new_record("r1"))
    first = pb.RunEvent()
    runs.emit("r1", first)
    with pytest.raises(RunExistsError):
        await runs.create(new_record("r1"))
    # Refused before anything of the new record is taken in: the run's log is the one it had,
    # so its events go on from the last seq (a log read again would start a new block).
    second = pb.RunEvent()
    runs.emit("r1", second)
    assert (first.seq, second.seq) == (1, 2)


async def test_a_create_losing_to_a_sibling_attaches_to_the_sibling_s_record(
    group: asyncio.TaskGroup,
) -> None:
    store = SiblingWritesFirst()
    store.sibling_creates = replace(new_record("r1", tenant="b"), seq_reserved_until=1024)
    runs = registry(store, group)
    with pytest.raises(RunExistsError) as caught:
        await runs.create(new_record("r1"))
    assert caught.value.existing.tenant == "b"
    stored = await store.get(sidecar_key("run", "r1"))
    assert stored is not None
    assert decode(stored.value).tenant == "b"
    assert (await runs.get("r1")).tenant == "b"


async def test_update_retries_and_keeps_a_sibling_write(group: asyncio.TaskGroup) -> None:
    store = SiblingWritesFirst()
    runs = registry(store, group)
    await runs.create(new_record("r1"))
    store.sibling_change = lambda record: replace(record, outcome=Outcome(code="sibling"))
    seen: list[str] = []

    def bump(record: RunRecordV1) -> RunRecordV1:
        seen.append(record.outcome.code)
        return replace(record, attempt=record.attempt + 1)

    updated = await runs.update("r1", bump)
    # The first try lost to the sibling; the retry applied the change on top of its write.
    assert seen == ["", "sibling"]
    assert (updated.attempt, updated.outcome.code) == (2, "sibling")
    assert await runs.get("r1") == updated


async def test_update_of_an_unknown_run_raises_a_typed_error(group: asyncio.TaskGroup) -> None:
    runs = registry(InMemoryStore(), group)
    with pytest.raises(UnknownRunError) as caught:
        await runs.update("nope", lambda record: record)
    assert caught.value.run_id == "nope"
    assert caught.value.reason == "RUN_NOT_FOUND"
    with pytest.raises(UnknownRunError):
        await runs.get("nope")
    assert await runs.find("nope") is None
    # An event for a run this process never read or wrote has no log to go to.
    with pytest.raises(UnknownRunError, match="nope"):
        runs.emit("nope", pb.RunEvent())


async def test_update_gives_up_after_repeated_conflicts(group: asyncio.TaskGroup) -> None:
    runs = registry(AlwaysConflicts(), group)
    await runs.create(new_record("r1"))
    with pytest.raises(RunRecordConflictError):
        await runs.update("r1", lambda record: replace(record, attempt=9))


async def test_a_change_that_raises_writes_nothing(group: asyncio.TaskGroup) -> None:
    store = InMemoryStore()
    runs = registry(store, group)
    await runs.create(new_record("r1"))
    before = await store.get(sidecar_key("run", "r1"))

    def refuse(record: RunRecordV1) -> RunRecordV1:
        raise LookupError("no")

    with pytest.raises(LookupError):
        await runs.update("r1", refuse)
    after = await store.get(sidecar_key("run", "r1"))
    assert before is not None
    assert after is not None
    assert after.value == before.value


async def test_reads_see_a_record_another_sidecar_changed(group: asyncio.TaskGroup) -> None:
    store = InMemoryStore()
    mine, sibling = registry(store, group), registry(store, group)
    await mine.create(new_record("r1"))
    await sibling.update("r1", lambda record: replace(record, attempt=5))
    assert (await mine.get("r1")).attempt == 5
    await sibling.create(new_record("r2", tenant="b"))
    assert (await mine.get("r2")).tenant == "b"


async def test_query_lists_every_record(group: asyncio.TaskGroup) -> None:
    store = InMemoryStore()
    a, b = registry(store, group), registry(store, group)
    await a.create(new_record("r1"))
    await a.create(new_record("r2"))
    await b.create(new_record("r3", tenant="b"))
    ids = [record.run_id for record in await a.query()]
    assert ids == ["r1", "r2", "r3"]
    assert [r.tenant for r in await a.query()] == ["", "", "b"]


def test_progress_tracks_tasks_and_approvals_and_folds_them_into_a_record() -> None:
    # What GetRun shows of an attempt executing here, and what its record gets when it ends.
    record = replace(new_record("r1"), tasks=(TaskRow(id="t1"),))
    progress = Progress(record)
    started = pb.RunEvent(type="task_started", task_id="t1", agent="worker")
    started.task_status.status = pb.TASK_STATUS_IN_PROGRESS
    added = pb.RunEvent(type="task_started", task_id="t2")
    added.task_status.status = pb.TASK_STATUS_IN_PROGRESS
    added.data.fields["title"].string_value = "second"
    asked = pb.RunEvent(type="approval_pending")
    asked.approval_pending.id = "a1"
    for event in (started, added, asked, asked, pb.RunEvent(type="agent_message")):
        progress.track(event)
    folded = progress.fold(record)
    assert folded.tasks == (
        TaskRow(id="t1", status=pb.TASK_STATUS_IN_PROGRESS, assignee="worker"),
        TaskRow(id="t2", title="second", status=pb.TASK_STATUS_IN_PROGRESS),
    )
    assert progress.pending_approvals == ["a1"]  # shown while it runs here (not written)
    assert record.tasks == (TaskRow(id="t1"),)  # a record is never mutated


class StoredBeforeReturning(InMemoryStore):
    """A store whose compare-and-set stores the value, then waits for ``go`` before returning
    (a file store's write runs in a thread: a read may see it before its writer resumes)."""

    def __init__(self) -> None:
        super().__init__()
        self.stored, self.go = asyncio.Event(), asyncio.Event()

    async def compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        written = await super().compare_and_set(key, expected, value, metadata)
        if expected is not None:
            self.stored.set()
            await self.go.wait()
        return written


async def test_a_read_during_its_own_write_shows_the_written_record(
    group: asyncio.TaskGroup,
) -> None:
    # A GetRun whose read sees this process's write stored before the writer resumes shows
    # what was written (the kill -9 adoption flake showed the run's older tasks).
    store = StoredBeforeReturning()
    runs = registry(store, group)
    await runs.create(replace(new_record("r1"), tasks=(TaskRow(id="t1"),)))
    done = TaskRow(id="t1", status=pb.TASK_STATUS_COMPLETED, assignee="worker", result="42")
    writing = group.create_task(runs.update("r1", lambda r: replace(r, tasks=(done,))))
    await store.stored.wait()
    seen = await runs.run_message(shown(await runs.get("r1")), full=True)
    store.go.set()
    await writing
    assert [(t.status, t.result) for t in seen.tasks] == [(pb.TASK_STATUS_COMPLETED, "42")]
    after = await runs.run_message(shown(await runs.get("r1")), full=True)
    assert [(t.status, t.result) for t in after.tasks] == [(pb.TASK_STATUS_COMPLETED, "42")]


class ReadReturnsLate(InMemoryStore):
    """A store whose next ``get`` (after ``hold``) reads the value, then waits for ``go``
    before returning it: a write may land in between."""

    def __init__(self) -> None:
        super().__init__()
        self.held, self.go = asyncio.Event(), asyncio.Event()
        self.holding = False

    async def get(self, key: str) -> MemoryEntry | None:
        entry = await super().get(key)
        if self.holding:
            self.holding = False
            self.held.set()
            await self.go.wait()
        return entry


async def test_a_read_older_than_this_process_s_claim_does_not_set_its_attempt_back(
    group: asyncio.TaskGroup,
) -> None:
    # A GetRun reads attempt 1; before its read returns, this process claims attempt 2. The
    # late read must not become the record its events are stamped from: the new attempt's
    # events would say attempt 1.
    store = ReadReturnsLate()
    runs = registry(store, group)
    await runs.create(new_record("r1"))
    store.holding = True
    reading = group.create_task(runs.get("r1"))
    await store.held.wait()
    await runs.update("r1", lambda r: replace(r, attempt=2))
    store.go.set()
    late = await reading
    assert late.attempt == 1  # what was stored when it began
    event = pb.RunEvent(type="task_started", task_id="t1")
    runs.emit("r1", event)
    assert event.attempt == 2


async def test_a_status_a_sibling_saved_is_announced_above_every_seq_it_may_have_used(
    group: asyncio.TaskGroup,
) -> None:
    # This process knows run r at seq 1; a sibling restored it, used seqs up to its
    # reservation (3072) and completed it (its run record), but its events never reached this
    # log. The announcement of the end must not reuse one of the sibling's seqs.
    store = InMemoryStore()
    here = registry(store, group)
    await here.create(new_record("r"))
    await here.announce("r", pb.RUN_STATUS_RUNNING)
    log = await here.log_of("r")
    assert log.last_seq < 1024
    key = sidecar_key("run", "r")
    entry = await store.get(key)
    assert entry is not None
    sibling = replace(decode(entry.value), attempt=2, seq_reserved_until=3072)
    await store.set(key, encode(sibling))
    lease = await RunLedger(MemoryStoreRunStore(store), owner="owner-b").acquire("r")
    await lease.complete({"code": "ok"})
    await here.refresh("r")  # what a watcher of a run executing elsewhere does
    for _ in range(200):
        if log.last_status == pb.RUN_STATUS_COMPLETED:
            break
        await asyncio.sleep(0.01)
    assert log.last_status == pb.RUN_STATUS_COMPLETED
    assert log.events[-1].seq > 3072
    history = await store.get(sidecar_key("events", "r"))
    assert history is not None  # saved, so the next process does not announce it again
