"""A restore or a cancel racing a sibling's claim loses: the run record decides (D16), whatever
this sidecar read of the run before."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from sidecar_helpers import ECHO, lease_holder, run_request

import sidecar.convert
import sidecar.execution
from oma_actors import TaskState
from oma_actors.keyspace import sidecar_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger, RunStoreOptions
from oma_actors.stores import InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.execution import RunExecutor
from sidecar.forks import RunForks
from sidecar.record import RunRecordV1
from sidecar.record_codec import decode
from sidecar.runs import RunRegistry
from sidecar.status import FailedPrecondition, InvalidArgument
from sidecar.stores import StoreRegistry
from sidecar.tool_host import ToolHost

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


SIBLING = "owner-b"


@pytest.fixture
async def parts() -> AsyncIterator[tuple[InMemoryStore, RunExecutor]]:
    """An executor of owner-a, leasing on its state store, and an interrupted run r1."""
    store = InMemoryStore()
    async with StoreRegistry() as stores, asyncio.TaskGroup() as group:
        registry = RunRegistry(store, spawn=group.create_task)
        executor = RunExecutor(
            registry=registry,
            tool_host=ToolHost(),
            stores=stores,
            python_tools={"echo": ECHO},
            spawn=group.create_task,
            default_store_uri="memory://",
            run_store=RunStoreOptions(MemoryStoreRunStore(store), owner="owner-a"),
        )
        request = run_request("r1", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
        record = RunRecordV1(run_id="r1", request_id="q", request=request, store_uri="memory://")
        await registry.create(record)
        # Its sidecar died holding the lease, which expired long ago: the run is interrupted.
        dead = RunLedger(
            MemoryStoreRunStore(store), owner="dead", lease_ttl=1, clock=lambda: time.time() - 60
        )
        await dead.acquire("r1", heartbeat=False)
        assert (await executor.current("r1")).status == pb.RUN_STATUS_INTERRUPTED
        yield store, executor


async def stored(store: InMemoryStore) -> RunRecordV1:
    entry = await store.get(sidecar_key("run", "r1"))
    assert entry is not None
    return decode(entry.value)


def sibling_claims_first(monkeypatch: pytest.MonkeyPatch, store: InMemoryStore, name: str) -> None:
    """A sibling takes r1's run record (its lease) after this sidecar read the run, just
    before this sidecar's own claim on the run record (``name`` in ``sidecar.execution``)."""
    ours = getattr(sidecar.execution, name)

    async def sibling_then_ours(*args: Any, **kwargs: Any) -> Any:
        ledger = RunLedger(MemoryStoreRunStore(store), owner=SIBLING)
        await ledger.acquire("r1", heartbeat=False)
        return await ours(*args, **kwargs)

    monkeypatch.setattr(sidecar.execution, name, sibling_then_ours)


async def test_a_restore_racing_a_sibling_restore_finds_the_run_active(
    parts: tuple[InMemoryStore, RunExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, executor = parts
    sibling_claims_first(monkeypatch, store, "claim_record")
    with pytest.raises(FailedPrecondition) as caught:
        await executor.restore(pb.RestoreRunRequest(run_id="r1"))
    assert caught.value.reason == "RUN_ACTIVE"
    assert (await stored(store)).attempt == 1  # not claimed here
    assert await lease_holder(store, "r1") == SIBLING
    assert not executor.running("r1")
    shown = await executor.current("r1")
    assert (shown.status, shown.holder) == (
        pb.RUN_STATUS_RUNNING,
        SIBLING,
    )  # as its run record says


async def test_a_cancel_racing_a_sibling_restore_does_not_mark_its_run(
    parts: tuple[InMemoryStore, RunExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, executor = parts
    sibling_claims_first(monkeypatch, store, "cancel_unheld")
    with pytest.raises(FailedPrecondition) as caught:
        await executor.cancel("r1")
    assert caught.value.reason == "RUN_OWNED_ELSEWHERE"
    assert (await stored(store)).outcome.code == ""  # nothing of a cancel written
    record = await RunLedger(MemoryStoreRunStore(store)).get("r1")
    assert record is not None
    assert record.status == "running"


async def test_an_interrupted_run_shows_and_cancels_the_tasks_of_its_latest_state(
    parts: tuple[InMemoryStore, RunExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The registry's record gets a run's tasks when an attempt ends; its dead attempt's
    # progress is in its latest state (checkpoint and journal), which GetRun and a cancel read.
    store, executor = parts
    working = TaskState(id="t1", title="t1", description="d", status="in_progress")

    async def latest_state(*_: object) -> SimpleNamespace:
        return SimpleNamespace(tasks=[working])

    monkeypatch.setattr(sidecar.execution, "latest_state", latest_state)
    shown = await executor.viewed(await stored(store), tasks=True)
    assert [task.status for task in shown.tasks] == [pb.TASK_STATUS_IN_PROGRESS]
    assert (await executor.cancel("r1", "enough")).status == pb.RUN_STATUS_CANCELLED
    [task] = (await stored(store)).tasks
    assert (task.status, task.result) == (pb.TASK_STATUS_FAILED, "cancelled: enough")


async def test_an_adopted_attempt_shows_the_tasks_of_the_state_it_goes_on_from(
    parts: tuple[InMemoryStore, RunExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The restored attempt reports no event for a task done before: its progress starts from
    # the latest state, not from the registry's record (its tasks as the last attempt began).
    _, executor = parts
    done = TaskState(id="t1", title="t1", description="d", status="completed", result="42")
    running = asyncio.Event()

    async def latest_state(*_: object) -> SimpleNamespace:
        return SimpleNamespace(tasks=[done])

    async def has_checkpoint(_: RunRecordV1) -> bool:
        return True

    async def attempt(*_: object, **__: object) -> None:
        running.set()
        await asyncio.Event().wait()  # until the cancel below

    monkeypatch.setattr(sidecar.execution, "latest_state", latest_state)
    monkeypatch.setattr(sidecar.execution, "run_attempt", attempt)
    monkeypatch.setattr(executor, "_has_checkpoint", has_checkpoint)
    assert await executor.adopt("r1") is not None
    try:
        await asyncio.wait_for(running.wait(), 5)
        shown = await executor.current("r1")
    finally:
        await executor.cancel("r1")
    assert [(t.status, t.result) for t in shown.tasks] == [(pb.TASK_STATUS_COMPLETED, "42")]


async def test_a_restore_claims_the_run_for_this_owner(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    store, executor = parts
    claimed, resumed = await executor.restore(pb.RestoreRunRequest(run_id="r1"))
    assert not resumed
    assert (claimed.status, claimed.record.attempt) == (pb.RUN_STATUS_QUEUED, 2)
    assert await lease_holder(store, "r1") == "owner-a"
    for _ in range(500):
        if (await executor.current("r1")).status == pb.RUN_STATUS_COMPLETED:
            break
        await asyncio.sleep(0.01)
    assert (await executor.current("r1")).status == pb.RUN_STATUS_COMPLETED
    assert (await stored(store)).result is not None  # written before the run shows its end


async def test_an_explicit_checkpoint_key_needs_an_explicit_run_id(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    _, executor = parts
    request = run_request("", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    # Whatever the key, the client cannot have known the id the server assigns.
    request.checkpoint.key = "__oma_checkpoint__/guess/latest"
    with pytest.raises(InvalidArgument, match="an explicit key needs an explicit run_id"):
        await executor.start(request)


async def test_a_restore_of_a_run_being_deleted_touches_no_lease(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    store, executor = parts
    await executor.claim_deletion("r1")
    before = await RunLedger(MemoryStoreRunStore(store)).get("r1")
    with pytest.raises(FailedPrecondition) as caught:
        await executor.restore(pb.RestoreRunRequest(run_id="r1"))
    assert caught.value.reason == "RUN_DELETING"
    # Refused before any claim: the run record the deletion is removing is not leased again.
    assert await RunLedger(MemoryStoreRunStore(store)).get("r1") == before
    assert not executor.running("r1")


async def test_a_run_another_sidecar_executes_is_not_forked(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    store, executor = parts
    await RunLedger(MemoryStoreRunStore(store), owner=SIBLING).acquire("r1", heartbeat=False)
    forks = run_forks(store, executor, SimpleNamespace())  # its stores are never opened
    with pytest.raises(FailedPrecondition) as caught:
        await forks.fork(pb.ForkRunRequest(run_id="r1", at_seq=3, new_run_id="child"))
    assert caught.value.reason == "RUN_ACTIVE"  # refused before its store is even opened
    assert await store.get(sidecar_key("run", "child")) is None


async def test_a_restore_of_a_run_executing_here_claims_nothing(
    parts: tuple[InMemoryStore, RunExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, executor = parts
    # Its attempt runs in this process (its lease, this owner's, may even read as expired):
    # a restore must not start a second attempt beside it.
    monkeypatch.setattr(executor, "running", lambda run_id: run_id == "r1")
    with pytest.raises(FailedPrecondition) as caught:
        await executor.restore(pb.RestoreRunRequest(run_id="r1"))
    assert caught.value.reason == "RUN_ACTIVE"
    assert (await stored(store)).attempt == 1


async def test_a_restore_overriding_the_team_must_keep_its_agents(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    store, executor = parts
    team = pb.TeamSpec()
    team.CopyFrom((await stored(store)).request.team)
    team.agents[0].name = "someone-else"
    with pytest.raises(InvalidArgument) as caught:
        await executor.restore(pb.RestoreRunRequest(run_id="r1", team=team))
    assert caught.value.field == "team.agents"
    assert (await stored(store)).attempt == 1  # nothing claimed


async def test_a_cancel_reason_over_the_limit_is_refused_before_anything(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    store, executor = parts
    with pytest.raises(InvalidArgument) as caught:
        await executor.cancel("r1", "x" * (sidecar.convert.MAX_REASON + 1))
    assert caught.value.field == "reason"
    assert (await stored(store)).outcome.code == ""
    record = await RunLedger(MemoryStoreRunStore(store)).get("r1")
    assert record is not None
    assert record.status == "running"  # still interrupted, not cancelled


async def test_a_cancel_of_a_run_another_sidecar_executes_names_its_owner(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    store, executor = parts
    await RunLedger(MemoryStoreRunStore(store), owner=SIBLING).acquire("r1", heartbeat=False)
    with pytest.raises(FailedPrecondition) as caught:
        await executor.cancel("r1")
    assert caught.value.reason == "RUN_OWNED_ELSEWHERE"
    assert f"runs in another sidecar ({SIBLING})" in caught.value.message
    assert caught.value.metadata == {"owner_id": SIBLING}  # its lease holder: its run record's
    assert (await stored(store)).outcome.code == ""


def run_forks(store: InMemoryStore, executor: RunExecutor, stores: Any) -> RunForks:
    """The history and fork service over r1's store and executor."""
    registry = RunRegistry(store, spawn=lambda coro: coro.close())
    return RunForks(registry=registry, executor=executor, stores=stores)


async def test_history_and_fork_of_a_run_that_keeps_no_history_are_typed_refusals(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    store, executor = parts
    async with StoreRegistry() as stores:
        forks = run_forks(store, executor, stores)
        with pytest.raises(FailedPrecondition) as listed:
            await forks.history(pb.GetRunHistoryRequest(run_id="r1"))
        with pytest.raises(FailedPrecondition) as forked:
            await forks.fork(pb.ForkRunRequest(run_id="r1", at_seq=3, new_run_id="child"))
    assert (listed.value.reason, forked.value.reason) == ("NO_HISTORY", "NO_HISTORY")
    assert "r1" in str(listed.value)
    assert await store.get(sidecar_key("run", "child")) is None


async def test_a_restore_giving_a_task_list_run_a_coordinator_is_refused(
    parts: tuple[InMemoryStore, RunExecutor],
) -> None:
    store, executor = parts
    request = pb.RestoreRunRequest(run_id="r1")
    request.coordinator.name = "lead"
    request.coordinator.model = "scripted"
    with pytest.raises(InvalidArgument) as caught:
        await executor.restore(request)
    assert caught.value.field == "coordinator"
    assert (await stored(store)).attempt == 1
