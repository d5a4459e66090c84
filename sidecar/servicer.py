"""The gRPC servicers: thin adapters from RPCs to the executor, registry, tool host and desk.

Every handler maps failures through ``status.abort`` (one table in ``sidecar/status.py``); no
business logic lives here. Each handler that touches a run asks ``sidecar.tenancy`` who calls
and whether the caller's tenant owns the run (NOT_FOUND when it does not). ``StartRun`` and
``ForkRun`` are admitted by the tenant's run quota, ``WatchRun`` by its watch quota
(``sidecar.quotas``).
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

import sidecar
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar._pb.oma.v1 import sidecar_pb2_grpc as pb_grpc
from sidecar.events import gap_event, selected
from sidecar.journal_watch import JournalWatch
from sidecar.plugins import usable_providers
from sidecar.quotas import (
    InputTooLargeError,
    RunQuota,
    TooManyRunsError,
    WatchQuota,
    held_runs,
)
from sidecar.schema import check_off_loop_schemas
from sidecar.status import InvalidArgument, SidecarError, abort, page_offset
from sidecar.stores import SCHEMES, shown_uri
from sidecar.tenancy import Tenancy, check_visible, sees, tenant_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from sidecar.approvals import ApprovalDesk
    from sidecar.execution import RunExecutor
    from sidecar.forks import RunForks
    from sidecar.host_calls import HostSession
    from sidecar.principals import Principal
    from sidecar.record import RunRecordV1, RunView
    from sidecar.retention import RunDeleter
    from sidecar.run_log import RunLog
    from sidecar.runs import RunRegistry
    from sidecar.timelines import RunTimelines
    from sidecar.tool_host import ToolHost

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Self = TypeVar("Self")
END_STATUSES = frozenset(
    {
        pb.RUN_STATUS_COMPLETED,
        pb.RUN_STATUS_FAILED,
        pb.RUN_STATUS_CANCELLED,
        pb.RUN_STATUS_INTERRUPTED,
    }
)
COMMIT_WAIT = 60.0
UNREADABLE = pb.RUN_STATUS_UNREADABLE


def unary(
    method: Callable[[Self, Req, Any], Awaitable[Resp]],
) -> Callable[[Self, Req, Any], Awaitable[Resp]]:
    """Map any failure of a unary handler to its status."""

    @functools.wraps(method)
    async def handler(self: Self, request: Req, context: Any) -> Resp:
        try:
            return await method(self, request, context)
        except (grpc.aio.AbortError, asyncio.CancelledError):
            raise
        except Exception as exc:
            await abort(context, exc)

    return handler


class RunServicer(pb_grpc.RunServiceServicer):
    """``oma.v1.RunService``."""

    def __init__(
        self,
        *,
        executor: RunExecutor,
        registry: RunRegistry,
        deleter: RunDeleter,
        timelines: RunTimelines,
        forks: RunForks,
        tenancy: Tenancy | None = None,
        heartbeat_s: float = 15.0,
        poll_s: float = 0.5,
        max_active_runs: int | None = None,
        max_watches: int | None = None,
    ) -> None:
        self._tenancy = tenancy or Tenancy()
        self.run_quota: RunQuota | None = None
        """``max_active_runs`` per tenant (``None``: no limit), admitting starts and forks."""
        if max_active_runs is not None:
            self.run_quota = RunQuota(
                max_active_runs, functools.partial(held_runs, registry, executor)
            )
        self.watch_quota = None if max_watches is None else WatchQuota(max_watches)
        """``max_watches`` open streams per tenant (``None``: no limit)."""
        self._executor = executor
        self._registry = registry
        self._deleter = deleter
        self._timelines = timelines
        self._forks = forks
        self._heartbeat_s = heartbeat_s
        self._poll_s = poll_s
        self._journal = JournalWatch(
            registry=registry, executor=executor, heartbeat_s=heartbeat_s, poll_s=poll_s
        )

    async def _visible(self, run_id: str, context: Any) -> RunRecordV1:
        """The record of ``run_id`` if the caller's tenant owns it (else ``UnknownRunError``)."""
        convert.check_run_id(run_id)
        return check_visible(self._tenancy.caller(context), await self._registry.get(run_id))

    @unary
    async def StartRun(self, request: pb.StartRunRequest, context: Any) -> pb.StartRunResponse:
        tenant = tenant_of(self._tenancy.caller(context))
        if self.run_quota is None:
            record, created = await self._executor.start(request, tenant=tenant)
        else:
            try:
                async with self.run_quota.admitting(tenant) as admission:
                    record, created = await self._executor.start(request, tenant=tenant)
                    if not created:
                        admission.unused()
            except TooManyRunsError:
                if not await self._makes_no_run(request, tenant):
                    raise
                # A retry of a start that made its run (or a taken run id): answered as ever.
                record, created = await self._executor.start(request, tenant=tenant)
        run = await self._registry.run_message(record, full=False)
        return pb.StartRunResponse(run=run, created=created)

    async def _makes_no_run(self, request: pb.StartRunRequest, tenant: str) -> bool:
        """Whether ``request`` names a run that exists (a retry, or a taken id): the start
        answers with it, or ALREADY_EXISTS, and never makes a run."""
        if request.run_id:
            convert.check_run_id(request.run_id)
            return await self._registry.find(request.run_id) is not None
        if request.request_id:
            claim = await self._registry.requests.find(tenant, request.request_id)
            return claim is not None and await self._registry.find(claim.run_id) is not None
        return False

    @unary
    async def GetRun(self, request: pb.GetRunRequest, context: Any) -> pb.Run:
        convert.check_run_id(request.run_id)
        if request.view not in pb.RunView.values():
            raise InvalidArgument("view", f"unknown value {request.view}")
        full = request.view == pb.RUN_VIEW_FULL
        record = await self._executor.viewed(
            await self._visible(request.run_id, context), tasks=full
        )
        return await self._registry.run_message(record, full=full)

    @unary
    async def ListRuns(self, request: pb.ListRunsRequest, context: Any) -> pb.ListRunsResponse:
        if not 0 <= request.page_size <= 500:
            raise InvalidArgument("page_size", "must be 0..500")
        offset = page_offset(request.page_token)
        statuses = set(request.statuses)
        unknown = sorted(statuses - set(pb.RunStatus.values()))
        if unknown:
            raise InvalidArgument("statuses", f"unknown run status {unknown[0]}")
        caller = self._tenancy.caller(context)
        found, unreadable = await self._registry.scan()
        views = await self._executor.viewed_all([r for r in found if sees(caller, r.tenant)])
        if statuses:
            views = [view for view in views if view.status in statuses]
        if not _sees_unreadable(caller):
            unreadable = {}
        views.sort(key=lambda view: (view.record.created_at, view.run_id), reverse=True)
        if statuses and UNREADABLE not in statuses:
            unreadable = {}
        elif statuses == {UNREADABLE}:
            views = []
        # First: a run whose record cannot be read needs the operator, and has no date to sort by.
        listed: list[str | RunView] = [*sorted(unreadable), *views]
        size = request.page_size or 50
        token = str(offset + size) if offset + size < len(listed) else ""
        # Only the page is converted: a run's last_event_seq may read its journal.
        runs = [
            _unreadable_run(item, unreadable[item])
            if isinstance(item, str)
            else await self._registry.run_message(item, full=False)
            for item in listed[offset : offset + size]
        ]
        return pb.ListRunsResponse(runs=runs, next_page_token=token)

    @unary
    async def RestoreRun(
        self, request: pb.RestoreRunRequest, context: Any
    ) -> pb.RestoreRunResponse:
        await self._visible(request.run_id, context)
        record, resumed = await self._executor.restore(request)
        run = await self._registry.run_message(record, full=False)
        return pb.RestoreRunResponse(run=run, resumed_from_checkpoint=resumed)

    @unary
    async def CancelRun(self, request: pb.CancelRunRequest, context: Any) -> pb.Run:
        await self._visible(request.run_id, context)
        record = await self._executor.cancel(request.run_id, request.reason)
        return await self._registry.run_message(record, full=False)

    @unary
    async def DeleteRun(self, request: pb.DeleteRunRequest, context: Any) -> pb.DeleteRunResponse:
        await self._visible(request.run_id, context)
        return pb.DeleteRunResponse(deleted_keys=await self._deleter.delete(request.run_id))

    @unary
    async def GetRunTimeline(
        self, request: pb.GetRunTimelineRequest, context: Any
    ) -> pb.GetRunTimelineResponse:
        await self._visible(request.run_id, context)
        return await self._timelines.get(request)

    @unary
    async def GetRunHistory(
        self, request: pb.GetRunHistoryRequest, context: Any
    ) -> pb.GetRunHistoryResponse:
        convert.check_run_id(request.run_id)
        await self._visible(request.run_id, context)  # another tenant's run: NOT_FOUND
        return await self._forks.history(request)

    @unary
    async def ForkRun(self, request: pb.ForkRunRequest, context: Any) -> pb.ForkRunResponse:
        convert.check_run_id(request.run_id)
        record = await self._visible(request.run_id, context)  # another tenant's: NOT_FOUND
        if self.run_quota is None:
            return await self._forks.fork(request)
        # The child is the parent's tenant's (the caller's), and unfinished until restored.
        async with self.run_quota.admitting(record.tenant):
            return await self._forks.fork(request)

    async def WatchRun(
        self, request: pb.WatchRunRequest, context: Any
    ) -> AsyncIterator[pb.RunEvent]:
        """Stream the run's journal from after_seq on, or its progress events (see the proto)."""
        slot = None
        try:
            if self.watch_quota is not None:
                slot = self.watch_quota.open(tenant_of(self._tenancy.caller(context)))
                # Released when the stream ends however it ends (cancelled, failed, the server
                # stopping), even while the generator waits at a yield, never to be resumed.
                context.add_done_callback(slot.release)
            events = await self._watched(request, context)
        except SidecarError as exc:
            if slot is not None:
                slot.release()
            await abort(context, exc)
        try:
            async for event in events:
                yield event
        except SidecarError as exc:
            await abort(context, exc)
        finally:
            if slot is not None:
                slot.release()

    async def _watched(
        self, request: pb.WatchRunRequest, context: Any
    ) -> AsyncIterator[pb.RunEvent]:
        """The events a ``WatchRun`` streams (its request checked, the run the caller's)."""
        convert.check_run_id(request.run_id)
        if request.after_seq < 0:
            raise InvalidArgument("after_seq", "must not be negative")
        await self._visible(request.run_id, context)
        if request.journal and request.progress:
            raise InvalidArgument("progress", "journal and progress exclude each other")
        log = await self._registry.log_of(request.run_id)
        # The journal is the run's one durable event log (sidecar.journal_watch); only a
        # run that keeps none (memory/Redis store, --no-journal, no checkpoints), or a
        # client asking by name, gets the progress stream and its own seq space.
        journal = None if request.progress else await self._journal.open(log, request)
        return self._follow(log, request) if journal is None else journal

    async def _follow(self, log: RunLog, request: pb.WatchRunRequest) -> AsyncIterator[pb.RunEvent]:
        types = set(request.types)
        cursor = request.after_seq
        end = END_STATUSES if request.follow_suspended else END_STATUSES | {pb.RUN_STATUS_SUSPENDED}
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while True:
            changed = log.changed()
            for event in log.since(cursor):
                if event.seq > cursor + 1:
                    yield gap_event(
                        log.run_id,
                        allow_gap=request.allow_gap,
                        first=cursor + 1,
                        last=event.seq - 1,
                    )
                cursor = event.seq
                if selected(event.type, types):
                    yield event
            if log.last_status in end and cursor >= log.last_seq:
                return
            # A run executing in another sidecar (a shared store) is followed by polling the
            # store: its saved history and its record (which announces a finished status).
            remote = not self._executor.running(log.run_id)
            wait = min(self._heartbeat_s, self._poll_s) if remote else self._heartbeat_s
            try:
                async with asyncio.timeout(wait):
                    await changed.wait()
                quiet_since = loop.time()
            except TimeoutError:
                if remote:
                    await self._registry.refresh(log.run_id)
                if loop.time() - quiet_since >= self._heartbeat_s:
                    quiet_since = loop.time()
                    yield pb.RunEvent(
                        run_id=log.run_id, type="heartbeat", time=convert.timestamp(convert.now())
                    )


class ApprovalServicer(pb_grpc.ApprovalServiceServicer):
    """``oma.v1.ApprovalService``."""

    def __init__(self, desk: ApprovalDesk, tenancy: Tenancy | None = None) -> None:
        self._desk = desk
        self._tenancy = tenancy or Tenancy()

    @unary
    async def ListApprovals(
        self, request: pb.ListApprovalsRequest, context: Any
    ) -> pb.ListApprovalsResponse:
        if request.run_id:
            convert.check_run_id(request.run_id)
        return await self._desk.list(request, self._tenancy.caller(context))

    @unary
    async def GetApproval(self, request: pb.GetApprovalRequest, context: Any) -> pb.Approval:
        return await self._desk.get(request, self._tenancy.caller(context))

    @unary
    async def DecideApproval(
        self, request: pb.DecideApprovalRequest, context: Any
    ) -> pb.DecideApprovalResponse:
        return await self._desk.decide(request, self._tenancy.caller(context))


class ToolHostServicer(pb_grpc.ToolHostServiceServicer):
    """``oma.v1.ToolHostService``: the host's session stream and the unary fallback."""

    def __init__(
        self, tool_host: ToolHost, *, tenancy: Tenancy | None = None, ping_s: float = 15.0
    ) -> None:
        self._host = tool_host
        self._tenancy = tenancy or Tenancy()
        self._ping_s = ping_s

    async def Connect(
        self, request_iterator: AsyncIterator[pb.ToolHostMessage], context: Any
    ) -> None:
        """Register, then exchange calls and results until either side ends the stream."""
        try:
            first = await anext(aiter(request_iterator), None)
            if first is None or first.WhichOneof("msg") != "register":
                raise InvalidArgument(
                    "register", "the first message must be Register", reason="REGISTER_REQUIRED"
                )
            await check_off_loop_schemas(d.input_schema_json for d in first.register.tools)
            tenant = tenant_of(self._tenancy.caller(context))
            session, ack = self._host.open_session(first.register, tenant=tenant)
        except (grpc.aio.AbortError, asyncio.CancelledError):
            raise
        except Exception as exc:
            await abort(context, exc)
        failure: list[Exception] = []
        try:
            await context.write(pb.ToolServerMessage(register_ack=ack))
            async with asyncio.TaskGroup() as group:
                writer = group.create_task(self._write(session, context))
                group.create_task(self._read(session, request_iterator, writer, failure))
        finally:
            self._host.close_session(session)
        if failure:
            await abort(context, failure[0])

    async def _read(
        self,
        session: HostSession,
        messages: AsyncIterator[pb.ToolHostMessage],
        writer: asyncio.Task[None],
        failure: list[Exception],
    ) -> None:
        try:
            async for message in messages:
                kind = message.WhichOneof("msg")
                if kind == "result":
                    status = self._host.submit(message.result, session=session)
                    if status is not None:
                        ack = pb.ResultAck(call_id=message.result.call_id, status=status)  # type: ignore[arg-type]
                        session.outbox.put_nowait(pb.ToolServerMessage(result_ack=ack))
                elif kind == "drain":
                    self._host.drain(session)
                elif kind == "register":
                    raise InvalidArgument("register", "sent twice on one stream")
                else:
                    raise InvalidArgument("msg", "one of register, result or drain is required")
        except SidecarError as exc:
            if isinstance(exc, InputTooLargeError):
                self._refuse_oversized(session, exc)
            failure.append(exc)
        finally:
            writer.cancel()

    def _refuse_oversized(self, session: HostSession, exc: InputTooLargeError) -> None:
        """A message over the input quota ends the stream (the host gets ``INPUT_TOO_LARGE``);
        if it was a result, its call ends first, with an error result for the model. Otherwise
        the stream's end would deliver the call again, and the host would run it again, only to
        send the same oversized result, until the call's timeout."""
        message = exc.request
        if isinstance(message, pb.ToolHostMessage) and message.WhichOneof("msg") == "result":
            self._host.refuse_oversized(
                message.result, size=exc.size, limit=exc.limit, tenant=session.tenant
            )

    async def _write(self, session: HostSession, context: Any) -> None:
        while True:
            try:
                async with asyncio.timeout(self._ping_s):
                    message = await session.outbox.get()
            except TimeoutError:
                message = pb.ToolServerMessage(ping=pb.Ping())
            await context.write(message)

    @unary
    async def CompleteToolCall(
        self, request: pb.CompleteToolCallRequest, context: Any
    ) -> pb.CompleteToolCallResponse:
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        tenant = tenant_of(self._tenancy.caller(context))
        status = self._host.submit(request.result, session=None, waiter=waiter, tenant=tenant)
        if status is None:
            try:
                async with asyncio.timeout(COMMIT_WAIT):
                    status = await waiter
            except TimeoutError:
                status = pb.ResultAck.STATUS_NOT_DURABLE
        ack = pb.ResultAck(call_id=request.result.call_id, status=status)  # type: ignore[arg-type]
        return pb.CompleteToolCallResponse(ack=ack)


class SystemServicer(pb_grpc.SystemServiceServicer):
    """``oma.v1.SystemService``."""

    def __init__(
        self, *, executor: RunExecutor, desk: ApprovalDesk, default_store_uri: str
    ) -> None:
        self._executor = executor
        self._desk = desk
        self._default_store_uri = default_store_uri

    @unary
    async def GetServerInfo(self, request: pb.GetServerInfoRequest, context: Any) -> pb.ServerInfo:
        capabilities = ["tool_host", "watch_resume", "restore", "approvals", "approval_gates"]
        if self._executor.journals.enabled:
            capabilities.append("journal")  # runs on file stores keep a durable journal
        return pb.ServerInfo(
            server_version=sidecar.__version__,
            api_versions=["oma.v1"],
            store_schemes=list(SCHEMES),
            providers=usable_providers(),
            python_tools=self._executor.python_tools,
            capabilities=capabilities,
            default_store_uri=shown_uri(self._default_store_uri),
        )


def _sees_unreadable(caller: Principal | None) -> bool:
    """Whether ListRuns shows ``caller`` the runs whose records cannot be read.

    Such a record's tenant cannot be read either: only an admin (or, without principals,
    everyone) is shown it.
    """
    return caller is None or caller.has("admin")


def _unreadable_run(run_id: str, problem: str) -> pb.Run:
    """How ListRuns shows a run whose stored record cannot be read."""
    return pb.Run(
        run_id=run_id,
        status=UNREADABLE,
        outcome=pb.Outcome(code="unreadable", message=problem),
    )
