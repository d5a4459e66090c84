"""One table of outcomes for RestoreRun, CancelRun, DeleteRun and retention, on every store.

The run record (``oma_actors.runs``) decides what a run is, and every sidecar leases on every
store kind, so the same request on a run in the same state answers the same on a memory, file,
SQLite or PostgreSQL state store (README "Run outcomes"). Each row is one state, seeded as a
sidecar leaves it: the registry record and the run record. A run that just failed on a real
sidecar is refused alike on each of them (its run record is failed, terminal: RS-02), even
while its attempt still writes its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Literal, cast

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, EchoInput, lease_holder, run_request
from test_sidecar_auth import error_info

import sidecar.scripted
from oma_actors import ToolContext, define_tool
from oma_actors.errors import ProviderError
from oma_actors.runs import MemoryStoreRunStore, RunLedger, RunStoreOptions
from oma_actors.stores import FileStore, InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient
from sidecar.execution import RunExecutor
from sidecar.record import Outcome, RunRecordV1, UnknownRunError
from sidecar.retention import Retention, RunDeleter
from sidecar.runs import RunRegistry
from sidecar.server import ServerConfig, Sidecar
from sidecar.status import FailedPrecondition
from sidecar.stores import StoreRegistry
from sidecar.tool_host import ToolHost

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine, Sequence
    from pathlib import Path

    from service_kit import FreshStores

    from oma_actors.llm import LLMResponse, Message
    from oma_actors.stores import AtomicStore

CHECKPOINTS = "memory://outcomes"
TTL = 30.0
KINDS = ["memory", "file", "sqlite", "postgresql"]
FAILED, COMPLETED = pb.RUN_STATUS_FAILED, pb.RUN_STATUS_COMPLETED
HANG_GUARD = 60  # seconds: only against a hang, never the assertion

# state -> (RestoreRun, CancelRun, DeleteRun, retention with nothing to keep)
OUTCOMES: dict[str, tuple[str, str, str, str]] = {
    "completed": ("RUN_ALREADY_TERMINAL", "RUN_ALREADY_TERMINAL", "deleted", "deleted"),
    "failed": ("RUN_ALREADY_TERMINAL", "RUN_ALREADY_TERMINAL", "deleted", "deleted"),
    "cancelled": ("RUN_ALREADY_TERMINAL", "cancelled", "deleted", "deleted"),
    "suspended": ("resumed", "cancelled", "deleted", "kept"),
    "running elsewhere": ("RUN_ACTIVE", "RUN_OWNED_ELSEWHERE", "RUN_ACTIVE", "kept"),
    "interrupted": ("resumed", "cancelled", "deleted", "kept"),
}


@pytest.fixture(params=KINDS)
async def state(
    request: pytest.FixtureRequest, tmp_path: Path, fresh_stores: FreshStores
) -> AsyncIterator[tuple[AtomicStore, bool]]:
    """A fresh state store of each kind, and whether it is shared across processes."""
    kind = request.param
    if kind == "memory":
        yield InMemoryStore(), False
    elif kind == "file":
        async with FileStore.open(tmp_path / "state.json") as store:
            yield store, False
    elif kind == "sqlite":
        yield await fresh_stores.sqlite(), False
    else:
        yield await fresh_stores.postgres(), True


@pytest.fixture
async def stores() -> AsyncIterator[StoreRegistry]:
    async with StoreRegistry() as registry:
        yield registry


def terms(store: AtomicStore, owner: str, *, shared: bool, ago: float = 0.0) -> RunStoreOptions:
    atomicity: Literal["process", "cross-process"] = "cross-process" if shared else "process"
    run_store = MemoryStoreRunStore(store, atomicity=atomicity)
    return RunStoreOptions(run_store, owner=owner, lease_ttl=TTL, clock=lambda: time.time() - ago)


def executor(
    store: AtomicStore, stores: StoreRegistry, *, shared: bool, owner: str = "me"
) -> RunExecutor:
    """A sidecar (``owner``, "me" by default), leasing on ``store``; its attempts never run
    (only claims)."""

    def spawn(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        coro.close()
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return cast("asyncio.Task[None]", done)

    return RunExecutor(
        registry=RunRegistry(store, spawn=spawn),
        tool_host=ToolHost(),
        stores=stores,
        python_tools={},
        spawn=spawn,
        default_store_uri=CHECKPOINTS,
        run_store=terms(store, owner, shared=shared),
    )


async def seed(store: AtomicStore, run_id: str, state: str, *, shared: bool) -> None:
    """``run_id`` as a sidecar leaves it in ``state``: its registry record and run record."""
    owner = {"running elsewhere": "other", "interrupted": "dead"}.get(state, "done")
    registry = RunRegistry(store, spawn=lambda coro: coro.close())
    record = RunRecordV1(
        run_id=run_id, request_id="r", request=run_request(run_id), store_uri=CHECKPOINTS
    )
    await registry.create(record)
    ago = 2 * TTL if state == "interrupted" else 0.0
    ledger = RunLedger(
        terms(store, owner, shared=shared).store,
        owner=owner,
        lease_ttl=TTL,
        clock=lambda: time.time() - ago,
    )
    lease = await ledger.acquire(run_id, heartbeat=False)
    status = {
        "completed": pb.RUN_STATUS_COMPLETED,
        "failed": pb.RUN_STATUS_FAILED,
        "cancelled": pb.RUN_STATUS_CANCELLED,
        "suspended": pb.RUN_STATUS_SUSPENDED,
    }.get(state, pb.RUN_STATUS_RUNNING)
    await registry.announce(run_id, pb.RUN_STATUS_RUNNING, Outcome())
    if state == "completed":
        await lease.complete({"code": "ok"})
    elif state == "failed":
        await lease.fail({"code": "error"})
    elif state == "cancelled":
        await lease.cancel()
    elif state == "suspended":
        await lease.suspend(["ap-1"])
    if status != pb.RUN_STATUS_RUNNING:
        await registry.announce(run_id, status, Outcome(code=state))


async def outcome_of(operation: Coroutine[Any, Any, Any], kind: str) -> str:
    try:
        result = await operation
    except FailedPrecondition as exc:
        return exc.reason
    if isinstance(result, tuple):  # RestoreRun: (record, resumed)
        result = result[0]
    if isinstance(result, int):
        return "deleted"
    if kind == "restore":
        assert (result.status, result.record.attempt) == (pb.RUN_STATUS_QUEUED, 2), result
        return "resumed"
    return "cancelled" if result.status == pb.RUN_STATUS_CANCELLED else str(result.status)


async def test_the_outcome_table_holds_on_every_store(
    state: tuple[AtomicStore, bool], stores: StoreRegistry
) -> None:
    store, shared = state
    me = executor(store, stores, shared=shared)
    deleter = RunDeleter(registry=me._registry, executor=me, stores=stores)
    found: dict[str, tuple[str, ...]] = {}
    for name in OUTCOMES:
        ids = {op: f"{name.replace(' ', '-')}-{op}" for op in ("restore", "cancel", "delete")}
        for run_id in ids.values():
            await seed(store, run_id, name, shared=shared)
        restoring = me.restore(pb.RestoreRunRequest(run_id=ids["restore"]))
        restore = await outcome_of(restoring, "restore")
        if restore == "resumed":  # claimed for this sidecar: its run record's lease says so
            assert await lease_holder(store, ids["restore"]) == "me"
        cancel = await outcome_of(me.cancel(ids["cancel"], "no"), "cancel")
        delete = await outcome_of(deleter.delete(ids["delete"]), "delete")
        found[name] = (restore, cancel, delete)
    retained = {name: f"{name.replace(' ', '-')}-kept" for name in OUTCOMES}
    for name, run_id in retained.items():
        await seed(store, run_id, name, shared=shared)
    swept = Retention(registry=me._registry, executor=me, deleter=deleter, keep_runs=0)
    deleted = set(await swept.sweep())
    for name, run_id in retained.items():
        found[name] += ("deleted" if run_id in deleted else "kept",)
    assert found == OUTCOMES


@pytest.mark.parametrize("seeded", ["interrupted"])
@pytest.mark.parametrize("restorer", ["another sidecar", "this sidecar"])
async def test_delete_and_restore_racing_exactly_one_wins(
    state: tuple[AtomicStore, bool], stores: StoreRegistry, restorer: str, seeded: str
) -> None:
    """The run record arbitrates two sidecars' claims; two claims of one sidecar (one owner,
    which the lease cannot tell apart) are taken one after the other (``sidecar.claims``)."""
    store, shared = state
    me = executor(store, stores, shared=shared)
    other = executor(store, stores, shared=shared, owner="other")
    if restorer == "this sidecar":
        other = me
    deleter = RunDeleter(registry=me._registry, executor=me, stores=stores)
    for index in range(5):
        run_id = f"race-{index}"
        await seed(store, run_id, seeded, shared=shared)
        outcomes = await asyncio.gather(
            deleter.delete(run_id),
            other.restore(pb.RestoreRunRequest(run_id=run_id)),
            return_exceptions=True,
        )
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(errors) == 1, outcomes
        assert isinstance(errors[0], FailedPrecondition | UnknownRunError), errors
        if isinstance(outcomes[0], BaseException):  # the restore won: the run is there
            assert (await me._registry.get(run_id)).attempt == 2
        else:
            with pytest.raises(UnknownRunError):
                await me._registry.get(run_id)
            # ... and so is its run record: the losing claim left no record of its own.
            assert await MemoryStoreRunStore(store).get(run_id) is None


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_a_run_that_just_completed_is_deleted_at_once(tmp_path: Path, kind: str) -> None:
    uri = "memory://done" if kind == "memory" else f"file://{tmp_path / 'state.json'}"
    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=uri,
        python_tools={"echo": ECHO},
        heartbeat_s=0.5,
        grace_s=0.1,
    )
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        for index in range(3):
            run_id = f"done-{index}"
            request = run_request(run_id, tools=("echo",), arguments={"text": "x"})
            await client.start_run(request)
            async for event in client.watch(run_id):
                if event.type == "run_status" and event.run_status.status in (
                    pb.RUN_STATUS_COMPLETED,
                    pb.RUN_STATUS_FAILED,
                ):
                    break
            # Its attempt may still be finishing its bookkeeping: deleted all the same.
            assert await client.delete_run(run_id) > 0
            with contextlib.suppress(Exception):
                await client.get_run(run_id)


async def test_an_attempt_that_fails_fails_its_run_record(
    stores: StoreRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run record is the authority (D16): a run the sidecar shows FAILED is failed there too,
    # so no sidecar adopts it and every store refuses its RestoreRun alike.
    import sidecar.execution

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the team could not be built")

    monkeypatch.setattr(sidecar.execution, "run_attempt", broken)
    store = InMemoryStore()
    tasks: list[asyncio.Task[None]] = []

    def spawn(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        tasks.append(asyncio.get_running_loop().create_task(coro))
        return tasks[-1]

    me = RunExecutor(
        registry=RunRegistry(store, spawn=spawn),
        tool_host=ToolHost(),
        stores=stores,
        python_tools={},
        spawn=spawn,
        default_store_uri=CHECKPOINTS,
        run_store=terms(store, "me", shared=False),
    )
    request = run_request("boom")
    request.team.host_tools.add(name="lookup", input_schema_json='{"type": "object"}')
    await me.start(request)
    await asyncio.gather(*tasks)
    assert (await me.current("boom")).status == pb.RUN_STATUS_FAILED
    assert (await me._registry.get("boom")).outcome.code != ""  # its end, as the sidecar told
    record = await RunLedger(MemoryStoreRunStore(store)).get("boom")
    assert record is not None
    assert record.status == "failed"


@pytest.fixture(params=KINDS)
async def state_uri(
    request: pytest.FixtureRequest, tmp_path: Path, fresh_stores: FreshStores
) -> AsyncIterator[str]:
    """The ``--store`` of a sidecar of each kind (PostgreSQL: a fresh table, dropped after)."""
    kind = request.param
    if kind == "memory":
        yield "memory://"
    elif kind in ("file", "sqlite"):
        yield f"{kind}://{tmp_path / f'state.{kind}'}"
    else:
        dsn, table = fresh_stores.postgres_table()  # skips locally, fails under CI=true if down
        yield f"{dsn}?table={table}"  # fresh_stores drops the table, its journal and marks


async def test_a_failed_runs_restore_is_refused_alike_on_every_store(
    state_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # t2's model fails after t2's tool call was committed: the run fails. A RestoreRun sent as
    # soon as the failure is told (while the attempt may still be writing its end: a file store
    # answered RUN_ACTIVE then) is RUN_ALREADY_TERMINAL on every store; nothing runs again.
    executed: list[str | None] = []

    async def count(args: EchoInput, ctx: ToolContext) -> str:
        executed.append(ctx.task_id)
        return f"counted:{args.text}"

    tool = define_tool(name="count", description="Count.", input_model=EchoInput, execute=count)
    failures = [ProviderError("scripted", "the model is down")]
    played = sidecar.scripted.respond

    def respond(script: pb.ScriptedModel, messages: Sequence[Message]) -> LLMResponse:
        answered = any(message.role == "assistant" for message in messages)
        if failures and answered and "Do t2" in sidecar.scripted._first_user_text(messages):
            raise failures.pop()
        return played(script, messages)

    monkeypatch.setattr(sidecar.scripted, "respond", respond)
    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=state_uri,
        python_tools={"count": tool},
        heartbeat_s=0.5,
        grace_s=0.1,
    )
    request = run_request("failing", tools=("count",), arguments={"text": "x"})
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        await client.start_run(request)
        assert await asyncio.wait_for(told_end(client, "failing"), HANG_GUARD) == FAILED
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.restore_run("failing")
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info(caught.value).reason == "RUN_ALREADY_TERMINAL"
        assert server.state is not None
        record = await MemoryStoreRunStore(server.state).get("failing")
    assert executed == ["t1", "t2"]
    assert record is not None
    assert record.status == "failed"  # the run record, every sidecar's authority


async def told_end(client: SidecarClient, run_id: str) -> int:
    """The first end (failed or completed) of the run's current attempt its watchers are told."""
    attempt = (await client.get_run(run_id)).attempt
    async for event in client.watch(run_id, progress=True):
        if event.attempt == attempt and event.run_status.status in (FAILED, COMPLETED):
            return event.run_status.status
    raise AssertionError("the watch ended without the run's end")
