"""Approval RPCs over ``oma_actors.approvals``: list, get and decide ledger rows.

The ledger rows live in the checkpoint store of the run that asked (its ``store_uri``). The
reviewer gets the exact canonical JSON that was hashed (``approval_hash_input``), so a host can
check ``sha256(canonical_json) == request_hash`` and render exactly what gets approved.

With principals (``sidecar.tenancy``) a caller sees only the approvals of its tenant's runs (any
other is NOT_FOUND, as if it did not exist), and a decision's reviewer is the authenticated
principal: a request naming another reviewer id is refused with PERMISSION_DENIED. A lookup
reads only the stores of the caller's runs (and the sidecar's own): another tenant's stores are
neither opened for it nor named in its errors.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from oma_actors import ConfigurationError, StoreError
from oma_actors.approvals import (
    ApprovalDecision,
    DurableApprovalLedger,
    Reviewer,
    decide_approval,
    get_approval_record,
    require_atomic_store,
)
from oma_actors.approvals.canonical import js_trim
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.authority import check_cancellable
from sidecar.events import approval_pb, canonical_json
from sidecar.record import UnknownRunError
from sidecar.run_view import decision_pb
from sidecar.status import (
    DataLoss,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
    page_offset,
)
from sidecar.stores import shown_uri
from sidecar.tenancy import check_visible, sees

if TYPE_CHECKING:
    from oma_actors.stores import MemoryStore
    from sidecar.execution import RunExecutor
    from sidecar.principals import Principal
    from sidecar.runs import RunRegistry
    from sidecar.stores import StoreRegistry

logger = logging.getLogger(__name__)
HASH = re.compile(r"[0-9a-f]{64}")
DECISION_OF: dict[int, Literal["approve", "reject"]] = {
    pb.DecideApprovalRequest.DECISION_APPROVE: "approve",
    pb.DecideApprovalRequest.DECISION_REJECT: "reject",
}


class ApprovalDesk:
    """Serves the approval rows of every store the sidecar's runs use."""

    def __init__(
        self,
        *,
        registry: RunRegistry,
        stores: StoreRegistry,
        executor: RunExecutor,
        default_store_uri: str,
    ) -> None:
        self._registry = registry
        self._stores = stores
        self._executor = executor
        self._default_store_uri = default_store_uri

    async def _scope(
        self, run_id: str, caller: Principal | None
    ) -> tuple[list[str], set[str] | None]:
        """The store URIs to read, and the ids of the runs ``caller`` may see (``None``: every
        run, no principals).

        With ``run_id``, that run's store. Else the stores of the runs ``caller`` may see and
        the sidecar's own: another tenant's stores are neither opened nor named (a lookup of
        one tenant must not open every store of the sidecar, nor tell it another's paths).
        """
        if run_id:
            record = check_visible(caller, await self._registry.get(run_id))
            return [record.store_uri], None if caller is None else {run_id}
        runs = await self._registry.query()
        if caller is not None:
            runs = [record for record in runs if sees(caller, record.tenant)]
        uris = {self._default_store_uri} | {record.store_uri for record in runs}
        visible = None if caller is None else {record.run_id for record in runs}
        return sorted(uris), visible

    async def _opened(self, uri: str, unreachable: list[str]) -> MemoryStore | None:
        """The store of ``uri``, or ``None`` (added to ``unreachable``) if it cannot be opened.

        A listing across every run must not fail for everyone because one run's store is
        unreachable (issue 24, item 3): that store is left out, logged and reported back
        with its password masked.
        """
        try:
            return await self._stores.get(uri)
        except (StoreError, ConfigurationError) as exc:
            logger.warning("approvals: skipping store %s: %s", shown_uri(uri), exc)
            unreachable.append(shown_uri(uri))
            return None

    def message(self, record: Any) -> pb.Approval:
        """The wire form of a ledger record, with its canonical JSON."""
        approval = approval_pb(record.request, canonical_json(record.request))
        decision: ApprovalDecision | None = record.decision
        if decision is not None:
            approval.decision.CopyFrom(decision_pb(decision))
            approval.state = approval.decision.decision
        return approval

    async def _find(self, request_id: str, caller: Principal | None) -> tuple[Any, MemoryStore]:
        uris, visible = await self._scope("", caller)
        unreachable: list[str] = []
        for uri in uris:  # each store opened as it is read, never all of them at once
            store = await self._opened(uri, unreachable)
            if store is None:
                continue
            record = await get_approval_record(store, request_id)
            if record is not None and (visible is None or record.request.run_id in visible):
                return record, store
            # Another tenant's is answered as one that does not exist, the stores that could
            # not be read included: a different answer would tell that the id exists.
        if unreachable:  # it may be in a store that could not be read: not "no such approval"
            raise Unavailable(
                "STORE_UNAVAILABLE",
                f"approval {request_id!r} is in no reachable store; unreachable: "
                + ", ".join(unreachable),
            )
        raise NotFound(
            "APPROVAL_NOT_FOUND", f"no approval {request_id!r}", metadata={"id": request_id}
        )

    async def list(
        self, request: pb.ListApprovalsRequest, caller: Principal | None = None
    ) -> pb.ListApprovalsResponse:
        """Approvals of one run or every run ``caller`` may see, filtered by state, paginated."""
        states = set(request.states) or {pb.APPROVAL_STATE_PENDING}
        if not 0 <= request.page_size <= 500:
            raise InvalidArgument("page_size", "must be 0..500")
        offset = page_offset(request.page_token)
        found: list[pb.Approval] = []
        uris, visible = await self._scope(request.run_id, caller)
        for uri in uris:
            if request.run_id:
                store: MemoryStore | None = await self._stores.get(uri)
            else:
                store = await self._opened(uri, [])
            if store is None:
                continue
            try:
                ledger_rows = await DurableApprovalLedger(require_atomic_store(store)).list(
                    run_id=request.run_id or None
                )
            except StoreError as exc:
                if request.run_id:
                    raise
                logger.warning("approvals: skipping a store that failed to list: %s", exc)
                continue
            found.extend(
                self.message(row)
                for row in ledger_rows
                if visible is None or row.request.run_id in visible
            )
        if pb.APPROVAL_STATE_PENDING in states:
            waiting = {a.run_id for a in found if a.state == pb.APPROVAL_STATE_PENDING}
            ended = {run_id for run_id in waiting if await self._ended(run_id)}
            found = [
                a for a in found if a.state != pb.APPROVAL_STATE_PENDING or a.run_id not in ended
            ]
        chosen = [approval for approval in found if approval.state in states]
        size = request.page_size or 50
        page = chosen[offset : offset + size]
        token = str(offset + size) if offset + size < len(chosen) else ""
        return pb.ListApprovalsResponse(approvals=page, next_page_token=token)

    async def _ended(self, run_id: str) -> bool:
        """Whether the run has ended (cancelled, failed, completed): a decision on an approval
        it still shows pending would never be used (``RestoreRun`` refuses an ended run), so
        such approvals are listed as pending no more."""
        try:
            check_cancellable(await self._executor.current(run_id))
        except FailedPrecondition:
            return True
        except (NotFound, DataLoss):
            return False  # shown as it is: the run's record is the operator's to look at
        return False

    async def get(
        self, request: pb.GetApprovalRequest, caller: Principal | None = None
    ) -> pb.Approval:
        """One approval by id."""
        if not js_trim(request.id):
            raise InvalidArgument("id", "is required")
        record, _ = await self._find(request.id, caller)
        return self.message(record)

    async def decide(
        self, request: pb.DecideApprovalRequest, caller: Principal | None = None
    ) -> pb.DecideApprovalResponse:
        """Record a decision on the reviewed hash; restore the run once nothing is pending.

        With a ``caller`` (principals) the reviewer is that principal; ``reviewer.id`` may be
        left empty, and naming anyone else is refused (PERMISSION_DENIED).
        """
        if not js_trim(request.id):
            raise InvalidArgument("id", "is required")
        if not HASH.fullmatch(request.request_hash):
            raise InvalidArgument("request_hash", "is required: the sha256 hex the reviewer saw")
        decision = DECISION_OF.get(request.decision)
        if decision is None:
            raise InvalidArgument("decision", "must be DECISION_APPROVE or DECISION_REJECT")
        reviewer_id = _reviewer_id(request.reviewer.id, caller)
        if request.resume not in pb.DecideApprovalRequest.ResumePolicy.values():
            raise InvalidArgument("resume", f"unknown value {request.resume}")
        edited = _edited_input(request.edited_input_json)
        existing, store = await self._find(request.id, caller)
        if existing.decision is None:
            # A run that ended (cancelled, failed, completed) waits for nothing: a decision
            # would be recorded and never used, and a reviewer told it counted.
            with contextlib.suppress(NotFound):  # a deleted run's approval: the ledger decides
                check_cancellable(await self._executor.current(existing.request.run_id))
        reviewer = Reviewer(reviewer_id, request.reviewer.display_name or None)
        decided = await decide_approval(
            store,
            request_id=request.id,
            request_hash=request.request_hash,
            decision=decision,
            reviewer=reviewer,
            edited_input=edited,
        )
        response = pb.DecideApprovalResponse(
            approval=self.message(decided), recorded=existing.decision is None
        )
        run_id = decided.request.run_id
        held = request.resume == pb.DecideApprovalRequest.RESUME_POLICY_NEVER
        with contextlib.suppress(UnknownRunError):  # deleted: nothing to resume either way
            await self._registry.update(run_id, lambda record: replace(record, resume_held=held))
        if not held:  # NEVER: the caller restores it
            run = await self._resume_if_ready(store, run_id)
            if run is not None:
                response.run.CopyFrom(run)
        return response

    async def resume_decided(self, run_id: str) -> None:
        """Resume a run that just suspended if none of its approvals is pending any more.

        A decision recorded while the run still ran (a parallel task was draining) restored
        nothing: the run was not suspended yet. Its resume policy (``WHEN_ALL_DECIDED``) is
        honoured when the run suspends, unless its last decision asked ``NEVER``, on whichever
        sidecar it was recorded (``RunRecordV1.resume_held``).
        """
        try:
            record = await self._registry.get(run_id)
            if record.resume_held:
                return
            store = await self._stores.get(record.store_uri)
            await self._resume_if_ready(store, run_id)
        except Exception:  # it stays suspended, as before: RestoreRun resumes it
            logger.exception("run %s: could not resume it after its approvals", run_id)

    async def _resume_if_ready(self, store: MemoryStore, run_id: str) -> pb.Run | None:
        try:
            view = await self._executor.current(run_id)
        except (DataLoss, NotFound):
            return None  # the decision is recorded; the run's record needs the operator
        if view.status != pb.RUN_STATUS_SUSPENDED:
            return None
        rows = await DurableApprovalLedger(require_atomic_store(store)).list(run_id=run_id)
        if any(row.decision is None for row in rows):
            return None
        try:
            restored, _ = await self._executor.restore(pb.RestoreRunRequest(run_id=run_id))
        except FailedPrecondition:
            return None  # restored concurrently by another decision
        return await self._registry.run_message(restored, full=False)


def _reviewer_id(given: str, caller: Principal | None) -> str:
    """The reviewer id a decision records: the authenticated principal, when there is one.

    Raises:
        InvalidArgument: no principals and no reviewer id.
        PermissionDenied: the request names a reviewer other than the authenticated principal.
    """
    if caller is None:
        if not js_trim(given):  # as OMA's trim(): "\x1c" is an id, "\ufeff" is blank
            raise InvalidArgument("reviewer.id", "is required")
        return given
    if given and given != caller.principal:
        raise PermissionDenied(
            "REVIEWER_MISMATCH",
            f"reviewer.id {given!r} is not the authenticated principal {caller.principal!r}",
        )
    return caller.principal


def _edited_input(text: str) -> dict[str, Any] | None:
    """``edited_input_json`` as an object (``None`` when empty), or refused."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument("edited_input_json", f"is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument("edited_input_json", "must be a JSON object")
    return value
