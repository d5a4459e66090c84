"""Starting, restoring and cancelling runs; each attempt runs as a task of the server.

Every change of a run's record goes through the registry (``RunRegistry.create`` and
``set_status`` with a change); a check that must hold when the record is written (a restore
claiming a run nobody runs, a cancel of a run that has not finished) is made inside that
change, so it holds against concurrent requests and sibling sidecars alike. The attempt itself
is ``sidecar.attempt``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors import LeaseError
from oma_actors.checkpoint import Checkpoint
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.attempt import (
    cancel_outcome,
    cancelled_tasks,
    finished,
    observer,
    run_attempt,
    settled,
)
from sidecar.fencing import Change, NotMine, both, still_mine
from sidecar.host_events import HostCallEvents
from sidecar.journals import RunJournals
from sidecar.plugins import approval_gates_available
from sidecar.record import (
    ACTIVE,
    NO_TENANT,
    TERMINAL,
    Outcome,
    RunExistsError,
    RunRecordV1,
)
from sidecar.run_ledger import cancel_record, check_resumable
from sidecar.run_view import initial_tasks
from sidecar.schema import check_off_loop_schemas
from sidecar.start_checks import attach, attach_own, check_checkpoint_key, request_digest
from sidecar.status import FailedPrecondition, InvalidArgument, map_error
from sidecar.stores import check_request_store, normalize_uri

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence

    from oma_actors import TeamRunResult, Tool
    from oma_actors.runs import RunStoreOptions
    from sidecar.runs import RunRegistry
    from sidecar.stores import StoreRegistry
    from sidecar.tool_host import ToolHost

logger = logging.getLogger(__name__)
LEASE_HELD = "RUN_LEASE_HELD"
LEASE_LOST = "RUN_LEASE_LOST"


class RunExecutor:
    """Owns the running runs of the server.

    Args:
        registry: run records and event logs.
        tool_host: host sessions and outstanding host tool calls.
        stores: the store registry.
        python_tools: tools the sidecar offers itself, by name.
        spawn: starts a coroutine as a task of the server's task group.
        default_store_uri: the store of runs that name none (normalized).
        store_roots: the directories (real paths) a request's file or SQLite store may be in.
        allowed_stores: the patterns a request's PostgreSQL or Redis store must match
            (``sidecar.stores.store_allowed``).
        host_events: announces host tool calls; the calls that timed out go into the outcome.
        run_store: this sidecar's lease terms (owner id, TTL) on a store shared by several
            sidecars; ``None``: runs are not leased.
        journals: where runs keep their journals; ``None``: new runs keep none.
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
        store_roots: Sequence[str] = (),
        allowed_stores: Sequence[str] = (),
        host_events: HostCallEvents | None = None,
        run_store: RunStoreOptions | None = None,
        journals: RunJournals | None = None,
    ) -> None:
        self._registry = registry
        self._host_events = host_events or HostCallEvents(registry)
        self._tool_host = tool_host
        self._stores = stores
        self._python_tools = dict(python_tools)
        self._spawn = spawn
        self._default_store_uri = default_store_uri
        self._store_roots = tuple(store_roots)
        self._allowed_stores = tuple(allowed_stores)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cancel_requested: dict[str, str] = {}  # run id -> the reason given
        self.run_store = run_store
        self.journals = journals or RunJournals(state_uri=default_store_uri, enabled=False)
        self.gates_available = approval_gates_available()

    @property
    def python_tools(self) -> list[str]:
        """Names of the Python tools on offer."""
        return sorted(self._python_tools)

    def running(self, run_id: str) -> bool:
        """Whether the run executes in this process now."""
        return run_id in self._tasks

    # -- start -----------------------------------------------------------------------------

    def _tool_known(self, declared: Collection[str], tenant: str) -> Callable[[str], bool]:
        def known(name: str) -> bool:
            return (
                name in self._python_tools
                or name in declared
                or self._tool_host.registered(name, tenant=tenant) is not None
            )

        return known

    async def start(
        self, request: pb.StartRunRequest, *, tenant: str = NO_TENANT
    ) -> tuple[RunRecordV1, bool]:
        """Register and launch a run of ``tenant``; ``(record, created)``, idempotent on
        request_id within the tenant."""
        if not request.run_id and request.request_id:
            earlier = await self._registry.query(request_id=request.request_id)
            mine = [record for record in earlier if record.tenant == tenant]
            if mine:
                return attach(request, mine[0]), False
        if request.run_id:
            convert.check_run_id(request.run_id)
            existing = await self._registry.find(request.run_id)
            if existing is not None:
                return attach_own(request, existing, tenant), False
        declared = {definition.name for definition in request.team.host_tools}
        # The schema checks take up to seconds: done in a thread, found cached by check_start.
        await check_off_loop_schemas(d.input_schema_json for d in request.team.host_tools)
        convert.check_start(request, self._tool_known(declared, tenant))
        self._check_gates(request.approval_gates)
        field = "checkpoint.store_uri"
        uri = normalize_uri(request.checkpoint.store_uri or self._default_store_uri, field=field)
        if request.checkpoint.store_uri:
            await check_request_store(
                uri,
                roots=self._store_roots,
                default_uri=self._default_store_uri,
                field=field,
                allowed=self._allowed_stores,
            )
        spec = pb.StartRunRequest()
        spec.CopyFrom(request)
        spec.run_id = request.run_id or str(uuid.uuid4())
        check_checkpoint_key(request.checkpoint.key, spec.run_id, assigned=not request.run_id)
        self.journals.check_request(request.checkpoint, uri)
        await self._stores.get(uri)  # fail now, not in the background, if it cannot open
        self._snapshot_host_tools(spec, tenant)
        record = RunRecordV1(
            run_id=spec.run_id,
            request_id=request.request_id,
            owner_id=self._registry.owner_id,
            request=spec,
            store_uri=uri,
            tasks=initial_tasks(spec),
            request_digest=request_digest(request),
            tenant=tenant,
        )
        try:
            record = await self._registry.create(record)
        except RunExistsError as exc:  # a concurrent start won meanwhile
            return attach_own(request, exc.existing, tenant), False
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

    def _snapshot_host_tools(self, spec: pb.StartRunRequest, tenant: str) -> None:
        """Persist the schema of every host tool the agents use, for restores."""
        declared = {definition.name for definition in spec.team.host_tools}
        for agent in spec.team.agents:
            for name in agent.tools:
                if name in self._python_tools or name in declared:
                    continue
                definition = self._tool_host.registered(name, tenant=tenant)
                if definition is not None:
                    spec.team.host_tools.append(definition)
                    declared.add(name)

    # -- restore and cancel ----------------------------------------------------------------

    def _check_restorable(self, record: RunRecordV1) -> None:
        if self.running(record.run_id) or record.status in ACTIVE:
            raise FailedPrecondition("RUN_ACTIVE", f"run {record.run_id!r} is running")
        if record.status in TERMINAL:
            raise FailedPrecondition(
                "RUN_ALREADY_TERMINAL",
                f"run {record.run_id!r} is {pb.RunStatus.Name(record.status)}",
            )

    async def restore(self, request: pb.RestoreRunRequest) -> tuple[RunRecordV1, bool]:
        """Resume a run from its checkpoint with its persisted spec; ``(record, resumed)``.

        The restoring sidecar becomes the run's owner.
        """
        convert.check_run_id(request.run_id)
        record = await self._registry.get(request.run_id)
        self._check_restorable(record)
        await check_resumable(self.run_store, record.run_id)
        spec = pb.StartRunRequest()
        spec.CopyFrom(record.request)
        if request.HasField("team"):
            await check_off_loop_schemas(d.input_schema_json for d in request.team.host_tools)
            self._override_team(spec, request.team, record.tenant)
        if request.HasField("coordinator"):
            if spec.WhichOneof("mode") != "goal":
                raise InvalidArgument("coordinator", "only goal runs have a coordinator")
            convert.check_agent(
                request.coordinator, "coordinator", lambda _: False, with_tools=False
            )
            spec.goal.coordinator.CopyFrom(request.coordinator)
        resumed = await self._has_checkpoint(record)
        owner = self._registry.owner_id

        def claim(current: RunRecordV1) -> RunRecordV1:
            self._check_restorable(current)  # a concurrent restore may have claimed it
            return replace(current, request=spec, attempt=current.attempt + 1, owner_id=owner)

        # Announce QUEUED before returning, so a watch started now follows the new attempt.
        claimed = await self._registry.set_status(
            record.run_id, pb.RUN_STATUS_QUEUED, Outcome(), change=claim
        )
        self._cancel_requested.pop(record.run_id, None)
        self._launch(claimed, restoring=resumed)
        return claimed, resumed

    async def adopt(self, run_id: str, dead_owner: str) -> RunRecordV1 | None:
        """Take over an active run of ``dead_owner`` whose lease expired (``sidecar.failover``).

        The claim is a compare-and-set of the record that requires ``dead_owner`` to still own
        the active run, so of two sidecars adopting at once only one claims it; the run's lease
        (acquired when the attempt starts) then decides against any other holder. ``None``:
        another sidecar was first, or the run is no longer active.
        """
        owner = self._registry.owner_id
        if self.running(run_id) or dead_owner == owner:
            return None

        def claim(current: RunRecordV1) -> RunRecordV1:
            if not current.active or current.owner_id != dead_owner:
                raise _NotAdoptable
            return replace(current, attempt=current.attempt + 1, owner_id=owner)

        try:
            record = await self._registry.get(run_id)
            if not record.active or record.owner_id != dead_owner:
                return None
            resumed = await self._has_checkpoint(record)
            claimed = await self._registry.set_status(
                run_id, pb.RUN_STATUS_QUEUED, Outcome(), change=claim
            )
        except _NotAdoptable:
            return None
        logger.warning("adopted run %s of %s (attempt %d)", run_id, dead_owner, claimed.attempt)
        self._launch(claimed, restoring=resumed)
        return claimed

    def _override_team(self, spec: pb.StartRunRequest, team: pb.TeamSpec, tenant: str) -> None:
        merged = pb.TeamSpec()
        merged.CopyFrom(team)
        declared = {definition.name for definition in merged.host_tools}
        merged.host_tools.extend(d for d in spec.team.host_tools if d.name not in declared)
        declared |= {definition.name for definition in spec.team.host_tools}
        convert.check_team(merged, "team", self._tool_known(declared, tenant))
        if {a.name for a in merged.agents} != {a.name for a in spec.team.agents}:
            raise InvalidArgument("team.agents", "must name the same agents as the run's team")
        spec.team.CopyFrom(merged)

    async def _has_checkpoint(self, record: RunRecordV1) -> bool:
        if record.request.checkpoint.disabled:
            return False
        store = await self._stores.get(record.store_uri)
        checkpoint = Checkpoint(
            store, run_id=record.run_id, key=record.request.checkpoint.key or None
        )
        return await checkpoint.load_latest() is not None

    async def cancel(self, run_id: str, reason: str = "") -> RunRecordV1:
        """Ask a run to stop; a no-op for a cancelled run.

        ``reason`` becomes the run's outcome message; the tasks it leaves in progress end
        failed with it.

        Raises:
            FailedPrecondition: the run has finished, or another sidecar is running it.
        """
        convert.check_run_id(run_id)
        if len(reason) > convert.MAX_REASON:
            raise InvalidArgument("reason", f"is longer than {convert.MAX_REASON} characters")
        record = await self._registry.get(run_id)
        if record.status == pb.RUN_STATUS_CANCELLED:
            return record
        _check_cancellable(record)
        task = self._tasks.get(run_id)
        if task is not None:
            self._cancel_requested[run_id] = reason
            task.cancel()
            await cancel_record(self.run_store, run_id, reason)
            return record
        owner = self._registry.owner_id
        stop_tasks = cancelled_tasks(reason)

        def cancelled(current: RunRecordV1) -> RunRecordV1:
            _check_cancellable(current)
            if current.active and current.owner_id != owner:
                # Marking it cancelled here would not stop it: its owner runs it.
                raise FailedPrecondition(
                    "RUN_OWNED_ELSEWHERE",
                    f"run {run_id!r} runs in another sidecar ({current.owner_id})",
                    metadata={"owner_id": current.owner_id},
                )
            return stop_tasks(current)

        record = await self._registry.set_status(
            run_id, pb.RUN_STATUS_CANCELLED, cancel_outcome(reason), change=cancelled
        )
        await cancel_record(self.run_store, run_id, reason)
        return record

    # -- execution -------------------------------------------------------------------------

    def _launch(self, record: RunRecordV1, *, restoring: bool) -> None:
        self._tasks[record.run_id] = self._spawn(self._execute(record, restoring=restoring))

    async def _execute(self, record: RunRecordV1, *, restoring: bool) -> None:
        run_id = record.run_id
        mine = still_mine(self._registry.owner_id, record.attempt)
        try:
            await self._registry.set_status(run_id, pb.RUN_STATUS_RUNNING, Outcome(), change=mine)
            store = await self._stores.get(record.store_uri)
            result = await run_attempt(
                record,
                store,
                restoring=restoring,
                python_tools=self._python_tools,
                tool_host=self._tool_host,
                on_progress=observer(self._registry, self._tool_host, run_id),
                run_store=self.run_store,
                journals=self.journals,
            )
        except asyncio.CancelledError:
            if run_id in self._cancel_requested:
                reason = self._cancel_requested[run_id]
                with contextlib.suppress(NotMine):
                    await self._registry.set_status(
                        run_id,
                        pb.RUN_STATUS_CANCELLED,
                        cancel_outcome(reason),
                        change=both(mine, cancelled_tasks(reason)),
                    )
            raise
        except NotMine:
            logger.warning("run %s: another sidecar owns it now; this attempt stops", run_id)
        except LeaseError as exc:
            if exc.code in (LEASE_HELD, LEASE_LOST):  # a sibling runs it: write nothing
                logger.warning("run %s: %s", run_id, exc)
                return
            await self._fail(run_id, exc, mine)
        except Exception as exc:
            await self._fail(run_id, exc, mine)
        else:
            with contextlib.suppress(NotMine):
                await self._finish(run_id, result, mine)
        finally:
            self._host_events.forget(run_id)
            self._tool_host.forget_run(run_id)
            self._tasks.pop(run_id, None)
            self._cancel_requested.pop(run_id, None)

    async def _fail(self, run_id: str, exc: Exception, mine: Change) -> None:
        mapped = map_error(exc)
        outcome = Outcome(code=mapped.reason, message=mapped.message)
        with contextlib.suppress(NotMine):
            await self._registry.set_status(run_id, pb.RUN_STATUS_FAILED, outcome, change=mine)

    async def _finish(self, run_id: str, result: TeamRunResult, mine: Change) -> None:
        status, outcome = finished(result)
        outcome = self._host_events.annotate(run_id, outcome)
        await self._registry.set_status(run_id, status, outcome, change=both(mine, settled(result)))


class _NotAdoptable(Exception):
    """Raised inside an adoption claim: the run is no longer the dead owner's active run."""


def _check_cancellable(record: RunRecordV1) -> None:
    if record.status in TERMINAL | {pb.RUN_STATUS_FAILED}:
        raise FailedPrecondition(
            "RUN_ALREADY_TERMINAL",
            f"run {record.run_id!r} is {pb.RunStatus.Name(record.status)}",
        )
