"""``GetRunHistory`` and ``ForkRun``: a run's history points, and a new run from one (D17).

Both work on the run's checkpoint store (the one its record names) and, when the sidecar keeps
the run's journal, that journal. ``ForkRun`` writes the child through ``fork_run`` (no model
call, the parent untouched) and registers it with the parent's spec under the child's id and no
owner: it shows ``INTERRUPTED`` until ``RestoreRun`` continues it like any interrupted run (no
failover sweep adopts it: ``sidecar.authority``); the child keeps its own journal from there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.checkpoint import fork_run, run_history
from oma_actors.errors import NoHistoryError, NotAHistoryPointError
from sidecar import convert
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.record import RunRecordV1
from sidecar.status import AlreadyExists, FailedPrecondition

if TYPE_CHECKING:
    from oma_actors.checkpoint import HistoryPoint
    from oma_actors.journal import RunJournal
    from sidecar.execution import RunExecutor
    from sidecar.journals import RunJournals
    from sidecar.runs import RunRegistry
    from sidecar.stores import StoreRegistry

NO_HISTORY = "NO_HISTORY"
NOT_A_HISTORY_POINT = "NOT_A_HISTORY_POINT"


class RunForks:
    """Answers ``GetRunHistory`` and ``ForkRun`` from the run registry and the runs' stores.

    Args:
        registry: the run records (which store each run checkpoints to).
        executor: what each run is (a running run is not forked).
        stores: opens a run's checkpoint store.
        journals: where runs keep their journals (``None``: each snapshot's ``journalRef``).
    """

    def __init__(
        self,
        *,
        registry: RunRegistry,
        executor: RunExecutor,
        stores: StoreRegistry,
        journals: RunJournals | None = None,
    ) -> None:
        self._registry = registry
        self._executor = executor
        self._stores = stores
        self._journals = journals

    async def history(self, request: pb.GetRunHistoryRequest) -> pb.GetRunHistoryResponse:
        """Every history point of ``request.run_id``, oldest first.

        Raises:
            InvalidArgument: a malformed run id.
            UnknownRunError: no such run (NOT_FOUND/RUN_NOT_FOUND).
            FailedPrecondition: the run keeps no history (``NO_HISTORY``).
        """
        convert.check_run_id(request.run_id)
        record = await self._registry.get(request.run_id)
        store = await self._stores.get(record.store_uri)
        journal = await self._journal(record)
        try:
            points = await run_history(store, record.run_id, journal=journal)
        except NoHistoryError as exc:
            raise FailedPrecondition(NO_HISTORY, str(exc)) from None
        finally:
            await self._release(journal)
        return pb.GetRunHistoryResponse(points=[point_pb(point) for point in points])

    async def fork(self, request: pb.ForkRunRequest) -> pb.ForkRunResponse:
        """Write and register the child of ``request.run_id`` at ``request.at_seq``.

        Raises:
            InvalidArgument: a malformed run id or new run id.
            UnknownRunError: no such parent (NOT_FOUND/RUN_NOT_FOUND).
            AlreadyExists: ``new_run_id`` is a run already (``RUN_ALREADY_EXISTS``, as
                ``StartRun`` says of a run id that is taken).
            FailedPrecondition: the parent is queued or running (``RUN_ACTIVE``), keeps no
                history (``NO_HISTORY``), or ``at_seq`` is no point (``NOT_A_HISTORY_POINT``,
                the nearest in the message and in ``nearest`` metadata).
        """
        convert.check_run_id(request.run_id)
        convert.check_run_id(request.new_run_id, "new_run_id")
        view = await self._executor.current(request.run_id)
        if view.active:
            raise FailedPrecondition("RUN_ACTIVE", f"run {view.run_id!r} is running")
        parent = view.record
        if await self._registry.find(request.new_run_id) is not None:
            raise AlreadyExists("RUN_ALREADY_EXISTS", f"run {request.new_run_id!r} already exists")
        store = await self._stores.get(parent.store_uri)
        journal = await self._journal(parent)
        try:
            info = await fork_run(
                store,
                parent.run_id,
                at_seq=request.at_seq,
                new_run_id=request.new_run_id,
                journal=journal,
            )
        except NotAHistoryPointError as exc:
            nearest = ",".join(str(seq) for seq in exc.nearest)
            raise FailedPrecondition(
                NOT_A_HISTORY_POINT, str(exc), metadata={"nearest": nearest}
            ) from None
        except NoHistoryError as exc:
            raise FailedPrecondition(NO_HISTORY, str(exc)) from None
        finally:
            await self._release(journal)
        spec = pb.StartRunRequest()
        spec.CopyFrom(parent.request)
        spec.run_id = info.run_id
        spec.checkpoint.key = ""  # fork_run wrote the child at its run id's own key
        child = await self._registry.create(
            RunRecordV1(
                run_id=info.run_id,
                request_id=f"fork:{info.parent_run_id}@{info.parent_seq}",
                request=spec,
                forked=True,
                store_uri=parent.store_uri,
                tenant=parent.tenant,  # the child belongs to the parent's tenant
            )
        )
        return pb.ForkRunResponse(
            run_id=info.run_id,
            parent_run_id=info.parent_run_id,
            parent_seq=info.parent_seq,
            run=await self._registry.run_message(await self._executor.viewed(child), full=False),
        )

    async def _journal(self, record: RunRecordV1) -> RunJournal | None:
        """The run's journal as its attempts write it (sealed with the sidecar's keys), or
        ``None``; give it back with ``RunJournals.release`` (a database's stays open)."""
        if self._journals is None:
            return None
        return await self._journals.reader(record.run_id, record.store_uri)

    async def _release(self, journal: RunJournal | None) -> None:
        if journal is not None and self._journals is not None:
            await self._journals.release(journal)


def point_pb(point: HistoryPoint) -> pb.HistoryPoint:
    """The wire form of a history point."""
    return pb.HistoryPoint(
        seq=point.seq,
        attempt=point.attempt,
        boundary=point.boundary,
        task_id=point.task_id or "",
        at=convert.timestamp(point.at),
        label=point.label,
    )
