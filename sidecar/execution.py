"""Starting, restoring and cancelling runs through the public ``OpenMultiAgent`` API.

Each run executes as one task owned by the server's task group. Its ``on_progress`` events go to
the run's event log, and ``ToolCalled`` (emitted after the tool's commit record was saved) is
what acknowledges a host's result as committed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from oma_actors import (
    ApprovalPending,
    Checkpoint,
    CheckpointOptions,
    CheckpointSaved,
    CheckpointSaveFailed,
    OpenMultiAgent,
    Tool,
    ToolCalled,
)
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.events import event_message
from sidecar.plugins import approval_gates_available, gates_of
from sidecar.runs import ACTIVE, TERMINAL, RunRecord
from sidecar.status import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, map_error
from sidecar.stores import normalize_uri

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Mapping, Sequence

    from oma_actors import MemoryStore, ProgressEvent, TeamRunResult
    from sidecar.runs import RunRegistry
    from sidecar.stores import StoreRegistry
    from sidecar.tool_host import HostSession, PendingCall, ToolHost

logger = logging.getLogger(__name__)
STATUS_OF_CODE = {
    "ok": pb.RUN_STATUS_COMPLETED,
    "suspended": pb.RUN_STATUS_SUSPENDED,
    "aborted": pb.RUN_STATUS_CANCELLED,
}


class RunExecutor:
    """Owns the running runs of the server.

    Args:
        registry: run records and event logs.
        tool_host: host sessions and outstanding host tool calls.
        stores: the store registry.
        python_tools: tools the sidecar offers itself, by name.
        spawn: starts a coroutine as a task of the server's task group.
        default_store_uri: the store of runs that name none.
    """

    def __init__(
        self,
        *,
        registry: RunRegistry,
        tool_host: ToolHost,
        stores: StoreRegistry,
        python_tools: Mapping[str, Tool],
        spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
        default_store_uri: str,
    ) -> None:
        self._registry = registry
        self._tool_host = tool_host
        self._stores = stores
        self._python_tools = dict(python_tools)
        self._spawn = spawn
        self._default_store_uri = default_store_uri
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.gates_available = approval_gates_available()

    @property
    def python_tools(self) -> list[str]:
        """Names of the Python tools on offer."""
        return sorted(self._python_tools)

    def running(self, run_id: str) -> bool:
        """Whether the run executes in this process now."""
        return run_id in self._tasks

    def on_dispatch(self, pending: PendingCall, session: HostSession) -> None:
        """Announce a delivery of a host tool call in the run's events."""
        record = self._registry.records.get(pending.run_id)
        if record is None:
            return
        event = pb.RunEvent(
            type="tool_call_dispatched", task_id=pending.task_id, agent=pending.agent
        )
        detail = event.tool_call_dispatched
        detail.tool_name = pending.tool_name
        detail.tool_call_id = pending.tool_call_id
        detail.session_id = session.session_id
        detail.delivery_attempt = pending.delivery_attempt
        self._registry.emit(record, event)

    # -- start -----------------------------------------------------------------------------

    def _tool_known(self, request: pb.StartRunRequest) -> Callable[[str], bool]:
        declared = {definition.name for definition in request.team.host_tools}

        def known(name: str) -> bool:
            return (
                name in self._python_tools
                or name in declared
                or self._tool_host.registered(name) is not None
            )

        return known

    def _existing(self, request: pb.StartRunRequest, run_id: str) -> RunRecord | None:
        record = self._registry.records.get(run_id)
        if record is None:
            return None
        same = record.request_id == request.request_id
        if same or request.conflict_policy == pb.CONFLICT_POLICY_USE_EXISTING:
            return record
        raise AlreadyExists(
            "RUN_ALREADY_EXISTS",
            f"run {run_id!r} was started by another request",
            metadata={
                "existing_request_id": record.request_id,
                "existing_status": pb.RunStatus.Name(record.status),
            },
        )

    async def start(self, request: pb.StartRunRequest) -> tuple[RunRecord, bool]:
        """Register and launch a run; ``(record, created)``, idempotent on request_id."""
        if not request.run_id and request.request_id in self._registry.by_request:
            return self._registry.records[self._registry.by_request[request.request_id]], False
        if request.run_id:
            convert.check_run_id(request.run_id)
            existing = self._existing(request, request.run_id)
            if existing is not None:
                return existing, False
        convert.check_start(request, self._tool_known(request))
        self._check_gates(request.approval_gates)
        uri = normalize_uri(
            request.checkpoint.store_uri or self._default_store_uri, field="checkpoint.store_uri"
        )
        await self._stores.get(uri)  # fail now, not in the background, if it cannot open
        run_id = request.run_id or str(uuid.uuid4())
        existing = self._existing(request, run_id)  # a concurrent start may have won meanwhile
        if existing is not None:
            return existing, False
        spec = pb.StartRunRequest()
        spec.CopyFrom(request)
        spec.run_id = run_id
        self._snapshot_host_tools(spec)
        record = RunRecord(
            run_id=run_id,
            request_id=request.request_id,
            request=spec,
            store_uri=uri,
            tasks={task.id: task for task in convert.initial_tasks(spec) if task.id},
        )
        await self._registry.create(record)
        self._launch(record, restoring=False)
        return record, True

    def _check_gates(self, gates: pb.ApprovalGates) -> None:
        wanted = gates.plan or gates.task_dispatch or bool(gates.tool_calls)
        if wanted and not self.gates_available:
            raise FailedPrecondition(
                "APPROVAL_GATES_UNAVAILABLE",
                "approval gates are not available in this build (ServerInfo capability "
                "'approval_gates')",
            )

    def _snapshot_host_tools(self, spec: pb.StartRunRequest) -> None:
        """Persist the schema of every host tool the agents use, for restores."""
        declared = {definition.name for definition in spec.team.host_tools}
        for agent in spec.team.agents:
            for name in agent.tools:
                if name in self._python_tools or name in declared:
                    continue
                definition = self._tool_host.registered(name)
                if definition is not None:
                    spec.team.host_tools.append(definition)
                    declared.add(name)

    # -- restore and cancel ----------------------------------------------------------------

    async def restore(self, request: pb.RestoreRunRequest) -> tuple[RunRecord, bool]:
        """Resume a run from its checkpoint with its persisted spec; ``(record, resumed)``."""
        convert.check_run_id(request.run_id)
        record = self._record(request.run_id)
        if self.running(record.run_id) or record.status in ACTIVE:
            raise FailedPrecondition("RUN_ACTIVE", f"run {record.run_id!r} is running")
        if record.status in TERMINAL:
            raise FailedPrecondition(
                "RUN_ALREADY_TERMINAL",
                f"run {record.run_id!r} is {pb.RunStatus.Name(record.status)}",
            )
        spec = pb.StartRunRequest()
        spec.CopyFrom(record.request)
        if request.HasField("team"):
            self._override_team(spec, request.team)
        if request.HasField("coordinator"):
            if spec.WhichOneof("mode") != "goal":
                raise InvalidArgument("coordinator", "only goal runs have a coordinator")
            convert.check_agent(
                request.coordinator, "coordinator", lambda _: False, with_tools=False
            )
            spec.goal.coordinator.CopyFrom(request.coordinator)
        previous = record.status
        record.status = pb.RUN_STATUS_QUEUED  # claims the run against a concurrent restore
        try:
            resumed = await self._has_checkpoint(record)
        except BaseException:
            record.status = previous
            raise
        record.request = spec
        record.attempt += 1
        record.cancel_requested = False
        # Announce QUEUED before returning, so a watch started now follows the new attempt.
        await self._registry.set_status(record, pb.RUN_STATUS_QUEUED, pb.Outcome())
        self._launch(record, restoring=resumed)
        return record, resumed

    def _override_team(self, spec: pb.StartRunRequest, team: pb.TeamSpec) -> None:
        merged = pb.TeamSpec()
        merged.CopyFrom(team)
        declared = {definition.name for definition in merged.host_tools}
        merged.host_tools.extend(d for d in spec.team.host_tools if d.name not in declared)
        declared |= {definition.name for definition in spec.team.host_tools}

        def known(name: str) -> bool:
            return (
                name in self._python_tools
                or name in declared
                or self._tool_host.registered(name) is not None
            )

        convert.check_team(merged, "team", known)
        if {a.name for a in merged.agents} != {a.name for a in spec.team.agents}:
            raise InvalidArgument("team.agents", "must name the same agents as the run's team")
        spec.team.CopyFrom(merged)

    async def _has_checkpoint(self, record: RunRecord) -> bool:
        if record.request.checkpoint.disabled:
            return False
        store = await self._stores.get(record.store_uri)
        checkpoint = Checkpoint(
            store, run_id=record.run_id, key=record.request.checkpoint.key or None
        )
        return await checkpoint.load_latest() is not None

    async def cancel(self, run_id: str) -> RunRecord:
        """Ask a run to stop; a no-op for a cancelled run."""
        convert.check_run_id(run_id)
        record = self._record(run_id)
        if record.status == pb.RUN_STATUS_CANCELLED:
            return record
        if record.status in TERMINAL | {pb.RUN_STATUS_FAILED}:
            raise FailedPrecondition(
                "RUN_ALREADY_TERMINAL",
                f"run {run_id!r} is {pb.RunStatus.Name(record.status)}",
            )
        record.cancel_requested = True
        task = self._tasks.get(run_id)
        if task is not None:
            task.cancel()
        else:
            await self._registry.set_status(
                record, pb.RUN_STATUS_CANCELLED, pb.Outcome(code="cancelled")
            )
        return record

    def _record(self, run_id: str) -> RunRecord:
        record = self._registry.records.get(run_id)
        if record is None:
            raise NotFound("RUN_NOT_FOUND", f"no run {run_id!r}", metadata={"run_id": run_id})
        return record

    # -- execution -------------------------------------------------------------------------

    def _launch(self, record: RunRecord, *, restoring: bool) -> None:
        self._tasks[record.run_id] = self._spawn(self._execute(record, restoring=restoring))

    async def _execute(self, record: RunRecord, *, restoring: bool) -> None:
        try:
            await self._registry.set_status(record, pb.RUN_STATUS_RUNNING, pb.Outcome())
            store = await self._stores.get(record.store_uri)
            result = await self._run(record, store, restoring=restoring)
        except asyncio.CancelledError:
            if record.cancel_requested:
                await self._registry.set_status(
                    record, pb.RUN_STATUS_CANCELLED, pb.Outcome(code="cancelled")
                )
            raise
        except Exception as exc:
            mapped = map_error(exc)
            await self._registry.set_status(
                record, pb.RUN_STATUS_FAILED, pb.Outcome(code=mapped.reason, message=mapped.message)
            )
        else:
            await self._finish(record, result)
        finally:
            self._tool_host.forget_run(record.run_id)
            self._tasks.pop(record.run_id, None)

    async def _run(
        self, record: RunRecord, store: MemoryStore, *, restoring: bool
    ) -> TeamRunResult:
        request = record.request
        host_tools = {definition.name: definition for definition in request.team.host_tools}

        def tools_of(agent: pb.AgentSpec) -> Sequence[Tool]:
            return [
                self._python_tools.get(name)
                or self._tool_host.make_tool(host_tools[name], lambda: record.attempt)
                for name in agent.tools
            ]

        team = convert.team_of(request.team, tools_of)
        orchestrator = OpenMultiAgent(
            on_progress=self._observer(record),
            max_concurrency=request.max_concurrency or convert.DEFAULT_CONCURRENCY,
            **gates_of(request.approval_gates),
        )
        checkpoint: CheckpointOptions | bool = (
            False
            if request.checkpoint.disabled
            else CheckpointOptions(
                store=store, run_id=record.run_id, key=request.checkpoint.key or None
            )
        )
        coordinator = (
            convert.agent_config(request.goal.coordinator, ())
            if request.goal.HasField("coordinator")
            else None
        )
        if restoring:
            return await orchestrator.restore(team, checkpoint=checkpoint, coordinator=coordinator)
        mode = request.WhichOneof("mode")
        if mode == "tasks":
            tasks = convert.tasks_of(request.tasks.tasks)
            return await orchestrator.run_tasks(team, tasks, checkpoint=checkpoint)
        if mode == "plan":
            plan = convert.plan_of(request.plan)
            return await orchestrator.run_from_plan(team, plan, checkpoint=checkpoint)
        return await orchestrator.run_team(
            team,
            request.goal.goal,
            checkpoint=checkpoint,
            coordinator=coordinator,
            plan_only=request.goal.plan_only,
        )

    def _observer(self, record: RunRecord) -> Callable[[ProgressEvent], None]:
        checkpointed = not record.request.checkpoint.disabled
        last_save_ok = True

        def on_progress(event: ProgressEvent) -> None:
            nonlocal last_save_ok
            if isinstance(event, CheckpointSaved):
                last_save_ok = True
            elif isinstance(event, CheckpointSaveFailed):
                last_save_ok = False
            elif isinstance(event, ApprovalPending):
                record.pending_approvals.append(event.request.id)
            self._registry.emit(record, event_message(event))
            if isinstance(event, ToolCalled) and not event.replayed:
                key = f"{event.run_id or ''}:{event.task_id or ''}:{event.tool_call_id}"
                # ToolCalled follows the commit boundary's save: the result is now durable.
                self._tool_host.on_committed(key, durable=checkpointed and last_save_ok)

        return on_progress

    async def _finish(self, record: RunRecord, result: TeamRunResult) -> None:
        record.result = convert.run_result_pb(result)
        record.tasks = {task.id: convert.task_state_pb(task) for task in result.tasks}
        record.pending_approvals = [request.id for request in result.pending_approvals]
        record.attempt = max(record.attempt, result.attempt)
        status = STATUS_OF_CODE.get(result.status.code, pb.RUN_STATUS_FAILED)
        outcome = pb.Outcome(code=result.status.code, message=result.status.message or "")
        await self._registry.set_status(record, status, outcome)
