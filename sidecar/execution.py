"""Starting, restoring and cancelling runs; each attempt runs as a task of the server.

What a run is comes from its run record (``sidecar.authority``, D16): this module writes no
status. A claim is decided by the run record: a restore, an adoption and a deletion take the
run's lease first (``sidecar.run_ledger.claim_record``), so whatever each claimant read, the
run record's ``acquire`` lets one through; a cancel cancels the run record unless a sidecar
holds it; two claims of this process take turns (``sidecar.claims``). The registry then
counts the claim's attempt and announces it to watchers (``RunRegistry.announce``); the run's
owner is its run record's lease holder.
The attempt itself is ``sidecar.attempt``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oma_actors import LeaseError, OmaError
from oma_actors.checkpoint import Checkpoint
from oma_actors.runs import MemoryStoreRunStore, read_run_records
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.attempt import (
    Progress,
    cancel_outcome,
    cancelled_tasks,
    finished,
    observer,
    run_attempt,
    settled,
)
from sidecar.authority import (
    check_cancellable,
    check_not_deleting,
    deleting_error,
    settled_status,
    view_of,
)
from sidecar.claims import Claims
from sidecar.convert import now
from sidecar.fencing import Change, NotMine, both, still_mine
from sidecar.host_events import HostCallEvents
from sidecar.journals import RunJournals
from sidecar.outage import unreachable, until_stored
from sidecar.owner import label_of
from sidecar.record import (
    FINISHED,
    NO_TENANT,
    Outcome,
    RunExistsError,
    RunRecordV1,
    RunView,
    TaskRow,
    UnknownRunError,
    WireStatus,
)
from sidecar.redelivery import latest_state
from sidecar.request_claims import RequestClaim
from sidecar.run_ledger import (
    cancel_record,
    cancel_unheld,
    claim_record,
    claim_unfinished,
    drop_claim,
    fail_record,
    release_claim,
)
from sidecar.run_view import initial_tasks, task_row_from_state
from sidecar.schema import check_off_loop_schemas
from sidecar.start_checks import (
    attach_own,
    attach_retry,
    check_checkpoint_key,
    check_claimed,
    request_digest,
)
from sidecar.status import FailedPrecondition, InvalidArgument, Unavailable, map_error
from sidecar.stores import check_request_store, normalize_uri

if TYPE_CHECKING:
    from collections.abc import (
        Callable,
        Collection,
        Coroutine,
        Mapping,
        Sequence,
    )
    from datetime import datetime

    from oma_actors import TeamRunResult, Tool
    from oma_actors.runs import RunLeaseHandle, RunStoreOptions
    from oma_actors.runs import RunRecord as LeaseRecord
    from sidecar.runs import RunRegistry
    from sidecar.stores import StoreRegistry
    from sidecar.tool_host import ToolHost

logger = logging.getLogger(__name__)
LEASE_HELD = "RUN_LEASE_HELD"
LEASE_LOST = "RUN_LEASE_LOST"
ALREADY_TERMINAL = "RUN_ALREADY_TERMINAL"
CONFLICT = "RUN_CONFLICT"
LEASE_ABORTED = "aborted"
"""The status code of an attempt that stopped because it lost its run's lease."""


def claim_refused(exc: LeaseError, held: str) -> Exception:
    """The wire's refusal of a claim its run record refused: the run ended
    (``RUN_ALREADY_TERMINAL``), or a sidecar holds it (``held``); else ``exc`` itself."""
    if exc.code == ALREADY_TERMINAL:
        return FailedPrecondition("RUN_ALREADY_TERMINAL", exc.message)
    if exc.code in (LEASE_HELD, CONFLICT):
        return FailedPrecondition(held, f"a sidecar holds the run: {exc.message}")
    return exc


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
        run_store: this sidecar's lease terms (owner id, TTL) on its state store, where the
            run records are.
        fenced: the orchestrator fences a durable run's writes with its lease (a store several
            sidecars share); otherwise the attempt holds the lease (``sidecar.attempt``).
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
        run_store: RunStoreOptions,
        fenced: bool = True,
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
        self.on_suspended: Callable[[str], Coroutine[Any, Any, None]] | None = None
        """Called (spawned) with the run id when an attempt here ends suspended: the approval
        desk resumes the run if its approvals were all decided meanwhile."""
        self._claims = Claims()
        self._here: dict[str, WireStatus] = {}  # run id -> its attempt's status, once started
        self._progress: dict[str, Progress] = {}  # run id -> what its attempt here did so far
        self.run_store = run_store
        self.fenced = fenced
        self.journals = journals or RunJournals(state_uri=default_store_uri, enabled=False)
        self.draining = False
        """The server is stopping (:meth:`drain`): no new attempt starts here."""

    def drain(self) -> None:
        """Start no attempt from now on: the server is stopping.

        Called before the server's grace period, in which the RPCs already received go on: a
        ``StartRun`` or ``RestoreRun`` among them is refused (``UNAVAILABLE`` / ``DRAINING``,
        retryable elsewhere) before it registers or claims anything, rather than told it
        started a run whose attempt the stop cancels at once; the failover sweep adopts
        nothing more. Reads, watches, cancels and deletions go on.
        """
        self.draining = True

    def _check_serving(self) -> None:
        """Refuse (``DRAINING``) a request that would start an attempt while the server stops."""
        if self.draining:
            raise Unavailable(
                "DRAINING",
                "the sidecar is stopping: retry on another sidecar, or once it is back",
            )

    @property
    def python_tools(self) -> list[str]:
        """Names of the Python tools on offer."""
        return sorted(self._python_tools)

    def running(self, run_id: str) -> bool:
        """Whether the run executes in this process now."""
        return run_id in self._tasks

    def _here_status(self, run_id: str) -> WireStatus | None:
        """The status of the attempt executing ``run_id`` here, or ``None`` (none does, or it
        has written and told its end: the run record shows it from there)."""
        if run_id not in self._tasks or self._registry.told(run_id) in FINISHED:
            return None
        return self._here.get(run_id)

    async def viewed(self, record: RunRecordV1, *, tasks: bool = False) -> RunView:
        """The run of ``record`` as its run record decides (``sidecar.authority``), with the
        progress of its attempt when it executes here; with ``tasks``, the task statuses of
        its latest state when it has not ended elsewhere (the registry's tasks are written
        when an attempt ends)."""
        here = self._here_status(record.run_id)
        if here is not None:
            return self._judged(record, None, now(), here)
        view = self._judged(record, await self.run_store.store.get(record.run_id), now(), here)
        # An attempt that ended without writing its end into the registry (killed between
        # its run record and its registry write: the registry's outcome is the claim's, empty)
        # left the registry's tasks as its claim saw them: its latest state knows better.
        unwritten = view.status in FINISHED and not record.outcome.code
        if tasks and (view.active or view.status == pb.RUN_STATUS_INTERRUPTED or unwritten):
            rows = await self._current_tasks(record)
            if view.status == pb.RUN_STATUS_CANCELLED:
                # As the cancel would have written them: in progress -> failed, with its reason.
                rows = cancelled_tasks(view.outcome.message)(replace(record, tasks=rows)).tasks
            return replace(view, tasks=rows)
        return view

    def _judged(
        self,
        record: RunRecordV1,
        lease: LeaseRecord | None,
        moment: datetime,
        here: WireStatus | None,
    ) -> RunView:
        """The run of ``record`` as its run record ``lease`` decides at ``moment``, or as its
        attempt executing here shows it (``here``: ``_here_status``), with its progress."""
        if here is None:
            return view_of(record, lease, now=moment, ttl=self.run_store.lease_ttl)
        progress = self._progress[record.run_id]
        return view_of(
            progress.fold(record),
            lease,
            now=moment,
            ttl=self.run_store.lease_ttl,
            here=here,
            waiting=progress.pending_approvals,
        )

    async def viewed_all(self, records: Sequence[RunRecordV1]) -> list[RunView]:
        """Each of ``records`` :meth:`viewed` (without tasks), reading the run records once.

        On the sidecar's state store the run records are listed in one read of their prefix
        (``ListRuns``, the failover sweep and retention make one read, not one per run).
        """
        run_store = self.run_store.store
        if not isinstance(run_store, MemoryStoreRunStore):
            return [await self.viewed(record) for record in records]
        leases = {
            run_id: record
            for run_id, record in (await read_run_records(run_store.store)).items()
            if not isinstance(record, LeaseError)  # unreadable: GetRun reports it
        }
        moment = now()
        return [
            self._judged(
                record, leases.get(record.run_id), moment, self._here_status(record.run_id)
            )
            for record in records
        ]

    async def _current_tasks(self, record: RunRecordV1) -> tuple[TaskRow, ...]:
        """The tasks of ``record``'s latest state (checkpoint and journal tail), else the
        registry's."""
        if record.request.checkpoint.disabled:
            return record.tasks
        store = await self._stores.get(record.store_uri)
        path = self.journals.path_of(record.run_id, record.store_uri)
        if path is not None and not await asyncio.to_thread(os.path.isfile, path):
            journal = None  # opening would create it: a view must not give a run a journal
        else:
            journal = await self.journals.open(record.run_id, record.store_uri)
        try:
            snapshot = await latest_state(record, store, journal)
        except (OmaError, OSError, ValueError) as exc:
            logger.warning("run %s: its latest state cannot be read: %s", record.run_id, exc)
            return record.tasks
        finally:
            if journal is not None:
                await self.journals.release(journal)
        if snapshot is None or not snapshot.tasks:
            return record.tasks
        return tuple(task_row_from_state(task) for task in snapshot.tasks)

    async def current(self, run_id: str) -> RunView:
        """The run ``run_id`` :meth:`viewed` (``UnknownRunError``)."""
        return await self.viewed(await self._registry.get(run_id))

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
    ) -> tuple[RunView, bool]:
        """Register and launch a run of ``tenant``; ``(run, created)``, idempotent on
        request_id within the tenant.

        Raises:
            AlreadyExists: ``RUN_ALREADY_EXISTS`` for a run id another request started;
                ``REQUEST_ID_REUSED`` for a request_id that started a run with another body or
                another run id (``sidecar.start_checks``).
            InvalidArgument: a malformed request, or one naming a tool the run cannot have.
        """
        if request.run_id:
            convert.check_run_id(request.run_id)
            existing = await self._registry.find(request.run_id)
            if existing is not None:
                return attach_own(request, await self.viewed(existing), tenant), False
        claimed = None
        if request.request_id:
            # A request_id starts one run (``sidecar.request_claims``): without a run id (or
            # with one no run has) a retry is found by its claim, and it is not used again for
            # another run id.
            requests = self._registry.requests
            await requests.backfill(self._registry.query)
            claimed = await requests.find(tenant, request.request_id)
            if claimed is not None:
                earlier = await self._registry.find(claimed.run_id)
                if earlier is not None:
                    return attach_retry(request, await self.viewed(earlier)), False
                check_claimed(request, claimed)  # and this start writes the claimed run
        declared = {definition.name for definition in request.team.host_tools}
        # The schema checks take up to seconds: done in a thread, found cached by check_start.
        await check_off_loop_schemas(d.input_schema_json for d in request.team.host_tools)
        convert.check_start(request, self._tool_known(declared, tenant))
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
        # The spec is stored, shown (Run.metadata) and replayed by a restore: its metadata as a
        # checkpoint keeps a task's, secret-looking values masked. The queue masks a task's
        # metadata anyway, so the run sees what it would have seen; the digest is the request's
        # as received, so a retry of it still matches.
        convert.mask_metadata(spec)
        spec.run_id = request.run_id or (claimed.run_id if claimed else str(uuid.uuid4()))
        check_checkpoint_key(request.checkpoint.key, spec.run_id, assigned=not request.run_id)
        self.journals.check_request(request.checkpoint, uri)
        await self._stores.get(uri)  # fail now, not in the background, if it cannot open
        self._snapshot_host_tools(spec, tenant)
        record = RunRecordV1(
            run_id=spec.run_id,
            request_id=request.request_id,
            request=spec,
            store_uri=uri,
            tasks=initial_tasks(spec),
            request_digest=request_digest(request),
            tenant=tenant,
        )
        self._check_serving()  # the checks above first: a bad request is told so
        if request.request_id and claimed is None:
            claim = RequestClaim(run_id=spec.run_id, digest=record.request_digest)
            if not await self._registry.requests.claim(tenant, request.request_id, claim):
                # A racing start of this request_id claimed it first: this one is its retry.
                return await self.start(request, tenant=tenant)
        try:
            record = await self._registry.create(record)
        except RunExistsError as exc:  # a concurrent start won meanwhile
            if (exc.existing.request_id, exc.existing.tenant) != (request.request_id, tenant):
                # The run id is another request's: this request_id started no run after all.
                await self._registry.requests.release(record)
            return attach_own(request, await self.viewed(exc.existing), tenant), False
        self._launch(record, restoring=False)
        return await self.viewed(record), True

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

    def _check_restorable(self, view: RunView) -> None:
        if view.record.deleting:
            raise deleting_error(view.record)
        if self.running(view.run_id) or view.active:
            raise FailedPrecondition("RUN_ACTIVE", f"run {view.run_id!r} is running")
        check_cancellable(view)  # a failed run's record is failed too (RS-02): start a new run

    async def _ended_here(self, run_id: str) -> None:
        """Wait for the attempt of ``run_id`` here if its run record has settled: the run
        ended (its watchers were told), only the attempt's bookkeeping is left, and a claim
        must not find it "running" meanwhile."""
        task = self._tasks.get(run_id)
        if task is None:
            return
        record = await self._registry.get(run_id)
        if settled_status(record, await self.run_store.store.get(run_id)) is not None:
            await asyncio.wait({task})

    async def restore(self, request: pb.RestoreRunRequest) -> tuple[RunView, bool]:
        """Resume a run from its checkpoint with its persisted spec; ``(run, resumed)``.

        An interrupted or suspended run goes on. The restoring sidecar becomes the run's owner.

        Raises:
            FailedPrecondition: ``RUN_ALREADY_TERMINAL`` (completed, failed or cancelled: a
                failed run's record is terminal, RS-02), ``RUN_ACTIVE`` (a sidecar runs it) or
                ``RUN_DELETING``.
        """
        convert.check_run_id(request.run_id)
        async with self._claims.held(request.run_id):
            return await self._restore(request)

    async def _restore(self, request: pb.RestoreRunRequest) -> tuple[RunView, bool]:
        await self._ended_here(request.run_id)
        view = await self.current(request.run_id)
        self._check_restorable(view)
        record = view.record
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
        self._check_serving()
        lease = await self._claim_lease(record.run_id)

        def claim(current: RunRecordV1) -> RunRecordV1:
            check_not_deleting(current)
            return replace(current, request=spec, attempt=current.attempt + 1)

        try:
            # Announce QUEUED before returning, so a watch started now follows the new attempt.
            claimed = await self._registry.announce(
                record.run_id, pb.RUN_STATUS_QUEUED, Outcome(), change=claim
            )
        except (FailedPrecondition, UnknownRunError):
            # Being deleted, or deleted, since it was read: the deletion may have removed the
            # run record before this claim's acquire made a new one (as for an adoption).
            await drop_claim(self.run_store, record.run_id)
            raise
        except Exception:
            await release_claim(lease)
            raise
        self._cancel_requested.pop(record.run_id, None)
        self._launch(claimed, restoring=resumed)
        return await self.viewed(claimed), resumed

    async def adopt(self, run_id: str) -> RunRecordV1 | None:
        """Take over an active run nobody holds the lease of (``sidecar.failover``).

        The run shows ``INTERRUPTED`` (``sidecar.authority``): its lease expired, or was given
        up unfinished, or never taken, and nobody took it for a TTL. Its last holder may be
        this very sidecar: an attempt that lost its lease (its store was unreachable for longer
        than the TTL) stopped and wrote nothing, and the run is adopted again like any other.

        The claim first takes the run's lease (``claim_record``): of two sidecars adopting at
        once, the run record's ``acquire`` lets one through, whatever either read before; a
        restore of this process waits for the adoption's turn (``sidecar.claims``). ``None``:
        another sidecar was first, or the run is not interrupted, or it was forked and never
        started (``RestoreRun`` starts it).
        """
        async with self._claims.held(run_id):
            return await self._adopt(run_id)

    async def _adopt(self, run_id: str) -> RunRecordV1 | None:
        if self.running(run_id) or self.draining:
            return None  # (stopping: a live sidecar adopts it, this one restarted included)
        view = await self.current(run_id)
        record = view.record
        # A run being deleted has its run record removed before its registry record: in
        # between it has none and shows interrupted; taking it would give it one again.
        if view.status != pb.RUN_STATUS_INTERRUPTED or record.deleting:
            return None
        if record.forked and await self.run_store.store.get(run_id) is None:
            return None  # forked and never started: ``RestoreRun`` starts it
        resumed = await self._has_checkpoint(record)
        try:
            # It may have been taken since it was read: its lease says by whom. The handle
            # renews nothing (``claim_record``): the attempt launched next acquires again.
            await claim_record(self.run_store, run_id)
        except LeaseError as exc:
            logger.info("run %s: not adopted: %s", run_id, exc)
            return None

        def claim(current: RunRecordV1) -> RunRecordV1:
            check_not_deleting(current)
            return replace(current, attempt=current.attempt + 1)

        try:
            claimed = await self._registry.announce(
                run_id, pb.RUN_STATUS_QUEUED, Outcome(), change=claim
            )
        except (FailedPrecondition, UnknownRunError):
            # Being deleted, or deleted, since it was read (by another sidecar: a DeleteRun
            # here waits for this claim): the deletion may have removed the run record before
            # this claim's acquire made a new one.
            await drop_claim(self.run_store, run_id)
            return None
        logger.warning("adopted run %s (attempt %d)", run_id, claimed.attempt)
        self._launch(claimed, restoring=resumed)
        return claimed

    async def _claim_lease(self, run_id: str) -> RunLeaseHandle:
        """Take the run's lease for a restore (``claim_record``), refusals as the wire's."""
        try:
            return await claim_record(self.run_store, run_id)
        except LeaseError as exc:
            raise claim_refused(exc, "RUN_ACTIVE") from None

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

    async def cancel(self, run_id: str, reason: str = "") -> RunView:
        """Ask a run to stop; a no-op for a cancelled run.

        ``reason`` becomes the run's outcome message; the tasks it leaves in progress end
        failed with it.

        Raises:
            FailedPrecondition: the run has finished, or another sidecar is running it.
        """
        convert.check_run_id(run_id)
        if len(reason) > convert.MAX_REASON:
            raise InvalidArgument("reason", f"is longer than {convert.MAX_REASON} characters")
        async with self._claims.held(run_id):
            return await self._cancel(run_id, reason)

    async def _cancel(self, run_id: str, reason: str) -> RunView:
        view = await self.current(run_id)
        if view.status == pb.RUN_STATUS_CANCELLED:
            return view
        check_cancellable(view)
        task = self._tasks.get(run_id)
        if task is not None:
            self._cancel_requested[run_id] = reason
            task.cancel(reason or "cancelled")  # the reason its journal's run/end gives
            await cancel_record(self.run_store, run_id, reason)
            return view
        owner = view.holder
        if view.active:
            # Marking it cancelled here would not stop it: its owner runs it.
            raise FailedPrecondition(
                "RUN_OWNED_ELSEWHERE",
                f"run {run_id!r} runs in another sidecar ({label_of(owner)})",
                metadata={"owner_id": owner},
            )

        try:
            # The run record decides first: a sidecar may have taken the run since it was read.
            await cancel_unheld(self.run_store, run_id, reason)
        except LeaseError as exc:
            raise claim_refused(exc, "RUN_OWNED_ELSEWHERE") from None
        # The tasks its last attempt left are in its latest state, not in the registry.
        tasks = await self._current_tasks(view.record)
        stop_tasks = cancelled_tasks(reason)

        def cancelled(current: RunRecordV1) -> RunRecordV1:
            check_not_deleting(current)
            return stop_tasks(replace(current, tasks=tasks))

        record = await self._registry.announce(
            run_id, pb.RUN_STATUS_CANCELLED, cancel_outcome(reason), change=cancelled
        )
        return await self.viewed(record)

    # -- execution -------------------------------------------------------------------------

    def _launch(
        self, record: RunRecordV1, *, restoring: bool, shown: WireStatus = pb.RUN_STATUS_QUEUED
    ) -> None:
        """Start an attempt of ``record`` here, showing ``shown`` until it starts (``QUEUED``
        for a new claim; ``RUNNING`` for the attempt a store outage paused, which goes on)."""
        if record.run_id in self._tasks:
            # Never two attempts of one run in one process: the one running meets the newer
            # claim at its next write (NotMine) and stops; the run is then adopted again.
            logger.warning("run %s: an attempt runs here already", record.run_id)
            return
        self._here[record.run_id] = shown
        self._progress[record.run_id] = Progress(record)
        self._tasks[record.run_id] = self._spawn(self._execute(record, restoring=restoring))

    async def _execute(self, record: RunRecordV1, *, restoring: bool) -> None:
        run_id = record.run_id
        progress = self._progress[run_id]
        # Every write of the attempt: only while the run is still its own, with its progress.
        mine = both(still_mine(record.attempt), progress.fold)
        suspended = False
        try:
            if restoring:  # it goes on from its latest state: show that state's tasks
                progress.tasks = {task.id: task for task in await self._current_tasks(record)}
            await self._registry.announce(run_id, pb.RUN_STATUS_RUNNING, Outcome(), change=mine)
            self._here[run_id] = pb.RUN_STATUS_RUNNING
            store = await self._stores.get(record.store_uri)
            result = await run_attempt(
                record,
                store,
                restoring=restoring,
                python_tools=self._python_tools,
                tool_host=self._tool_host,
                on_progress=observer(self._registry, self._tool_host, run_id, progress),
                run_store=self.run_store,
                fenced=self.fenced,
                journals=self.journals,
            )
        except asyncio.CancelledError:
            await self._cancelled(run_id, mine)
            raise
        except NotMine:
            logger.warning("run %s: another sidecar owns it now; this attempt stops", run_id)
        except LeaseError as exc:
            if exc.code in (LEASE_HELD, LEASE_LOST):  # a sibling runs it: write nothing
                logger.warning("run %s: %s", run_id, exc)
                await self._cancelled(run_id, mine)  # lost to this sidecar's own CancelRun
                return
            await self._fail(run_id, exc, mine)
        except Exception as exc:
            if unreachable(exc):
                # The store did not answer: the run did not fail. It goes on from its last
                # checkpoint once the store answers (``_resume``).
                logger.warning("run %s: store unreachable, the run waits: %s", run_id, exc)
                self._spawn(self._resume(record))
                return
            await self._fail(run_id, exc, mine)
        else:
            if result.status.code == LEASE_ABORTED:
                # The lease was lost (another owner took the run, or it expired while the
                # store was unreachable): the run is not ours to settle. Its record stays as
                # it is; whoever holds the lease next (maybe this sidecar again) finishes it.
                logger.warning("run %s: lease lost; this attempt stops", run_id)
                await self._cancelled(run_id, mine)
                return
            await until_stored(lambda: self._finish(run_id, result, mine))
            suspended = result.status.code == "suspended"
        finally:
            self._host_events.forget(run_id)
            self._tool_host.forget_run(run_id)
            self._tasks.pop(run_id, None)
            self._here.pop(run_id, None)
            self._progress.pop(run_id, None)
            self._cancel_requested.pop(run_id, None)
        if suspended and self.on_suspended is not None:
            # Its approvals may have been decided while a parallel task still ran: the
            # decisions resumed nothing then, and nobody decides again.
            self._spawn(self.on_suspended(run_id))

    async def _resume(self, record: RunRecordV1) -> None:
        """Go on with an attempt its store's outage stopped, once the store answers.

        Within the lease nothing visible changes: the same attempt goes on from its last
        checkpoint (this owner re-acquires its own lease). A lease that lapsed meanwhile makes
        the run interrupted, and it is adopted (attempt + 1), here if nowhere else first.
        """
        run_id = record.run_id
        view = await until_stored(lambda: self.current(run_id))
        stored = view.record
        if self.running(run_id) or stored.attempt != record.attempt:
            return  # adopted or restored meanwhile
        if view.status == pb.RUN_STATUS_INTERRUPTED:
            await self.adopt(run_id)
        elif view.active:
            restoring = await self._has_checkpoint(stored)
            if not self.running(run_id):  # the failover sweep may have adopted it meanwhile
                self._launch(stored, restoring=restoring, shown=pb.RUN_STATUS_RUNNING)

    async def claim_deletion(self, run_id: str) -> RunRecordV1:
        """Mark ``run_id`` as being deleted, in a compare-and-set against every other claim:
        of a ``DeleteRun`` and a ``RestoreRun`` (or a cancel, an adoption) racing, exactly one
        wins. A run whose run record has not ended is held first (``claim_unfinished``), so a
        claim on the run record made after this one read the run is seen too. A run that just
        finished here is waited for (its attempt is writing its end).

        Raises:
            FailedPrecondition: ``RUN_ACTIVE``: a sidecar executes the run (or claimed it).
        """
        async with self._claims.held(run_id):
            return await self._claim_deletion(run_id)

    async def _claim_deletion(self, run_id: str) -> RunRecordV1:
        await self._ended_here(run_id)
        view = await self.current(run_id)
        if self.running(run_id) or view.active:
            raise FailedPrecondition(
                "RUN_ACTIVE",
                f"run {run_id!r} is {pb.RunStatus.Name(view.status)}: cancel it first",
            )
        if not view.record.deleting:  # else another DeleteRun holds it: finish that deletion
            try:
                # A restore or an adoption may have acquired it since it was read.
                await claim_unfinished(self.run_store, run_id)
            except LeaseError as exc:
                raise claim_refused(exc, "RUN_ACTIVE") from None

        def deleting(current: RunRecordV1) -> RunRecordV1:
            if current.deleting:
                return current  # another DeleteRun got here first: finish it all the same
            return replace(current, deleting=True)

        return await self._registry.update(run_id, deleting)

    async def _cancelled(self, run_id: str, mine: Change) -> None:
        """Record the cancel asked by ``CancelRun`` here, if one was (else write nothing)."""
        if run_id not in self._cancel_requested:
            return
        reason = self._cancel_requested[run_id]
        with contextlib.suppress(NotMine):
            await self._registry.announce(
                run_id,
                pb.RUN_STATUS_CANCELLED,
                cancel_outcome(reason),
                change=both(mine, cancelled_tasks(reason)),
            )

    async def _fail(self, run_id: str, exc: Exception, mine: Change) -> None:
        mapped = map_error(exc)
        outcome = Outcome(code=mapped.reason, message=mapped.message)
        with contextlib.suppress(NotMine):
            mine(await self._registry.get(run_id))  # taken over meanwhile: not ours to fail
            # The run record first: it decides what every sidecar shows (D16).
            await fail_record(self.run_store, run_id, {"code": "error", "message": mapped.message})
            await self._registry.announce(run_id, pb.RUN_STATUS_FAILED, outcome, change=mine)

    async def _finish(self, run_id: str, result: TeamRunResult, mine: Change) -> None:
        status, outcome = finished(result)
        outcome = self._host_events.annotate(run_id, outcome)
        with contextlib.suppress(NotMine):
            await self._registry.announce(
                run_id, status, outcome, change=both(mine, settled(result))
            )
