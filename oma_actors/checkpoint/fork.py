"""``fork_run``: a new run from any history point, without re-running effects (decision D17).

The child is the parent's state at the point (``state_at``) under the child's run id, with
``forkedFrom`` naming the parent and the point. Written: the child's snapshot (its latest, which
is also its first history anchor, written once) and, when it is suspended on approvals, the
child's own ledger rows. Never touched: the parent's snapshot, anchors, ledger rows and journal
events. No model is called.

Effects. Tool results committed up to the point are in the child's state: a restore replays
them. A call the journal shows started but not committed at the point may have had its effect.
``fork_run`` has no team to ask whether its tool is ``unsafe`` (a safe call's ``tool/call`` looks
like an unsafe dispatch record), so it marks every such call dispatched (``mark_started_unsafe``)
and lists the ones it marked only for that reason in the child's snapshot (``FORK_MARKED``). The
child's restore has the team: it clears the mark of each listed call whose tool is not ``unsafe``
(``clear_fork_marks``), so that call runs again, as after a crash (decision D1), while an unsafe
one is never run again (its ``reconcile``, or ``TOOL_OUTCOME_UNKNOWN``). A reader that ignores
the list (OMA, an older build) keeps every mark: it never re-runs a call, the safe side.
Everything after the point runs fresh in the child.

Approvals. A pending request binds its run id (its id is derived from it), and a restore refuses
a request of another run; so each pending request is re-created for the child with the same
scope, boundary and content (hence the same hash). A request the parent's ledger holds decided
is decided the same way on the child's row, by the same reviewer, so a decided approval stays
bound; an undecided one waits for its own decision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, cast

from oma_actors.approvals import (
    DurableApprovalLedger,
    create_approval_request,
    get_approval_record,
    require_atomic_store,
)
from oma_actors.approvals.canonical import js_trim
from oma_actors.checkpoint.anchors import history_entries, latest_anchor
from oma_actors.checkpoint.codec import encode
from oma_actors.checkpoint.history import load_timeline
from oma_actors.checkpoint.journal_path import mark_started_unsafe
from oma_actors.checkpoint.manager import Checkpoint
from oma_actors.clock import to_iso, utcnow
from oma_actors.domain.snapshot import ForkedFrom
from oma_actors.errors import CheckpointError, RunIdTakenError
from oma_actors.journal.base import read_run
from oma_actors.journal.ref import THROUGH_MEMBER, open_journal_ref
from oma_actors.keyspace import checkpoint_key, history_key, run_record_key
from oma_actors.stores.base import Expect, is_conditional_store

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest
    from oma_actors.domain.snapshot import CheckpointSnapshot
    from oma_actors.journal.base import RunJournal
    from oma_actors.journal.fold import StartedCall
    from oma_actors.stores.base import ConditionalStore, MemoryStore


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkInfo:
    """A fork ``fork_run`` wrote.

    Attributes:
        run_id: the child run (restore it with ``CheckpointOptions(store, run_id=run_id)``).
        parent_run_id: the run it was forked from.
        parent_seq: the parent's history point it starts at.
    """

    run_id: str
    parent_run_id: str
    parent_seq: int


async def fork_run(
    store: MemoryStore,
    run_id: str,
    *,
    at_seq: int,
    new_run_id: str,
    journal: RunJournal | None = None,
) -> ForkInfo:
    """Start run ``new_run_id`` from ``run_id``'s history point ``at_seq`` (see the module doc).

    Args:
        store: the parent's checkpoint store; the child is written there.
        run_id: the parent.
        at_seq: a ``HistoryPoint.seq`` of the parent.
        new_run_id: the child's id; no run of that id may exist in ``store``.
        journal: the parent's journal (``None``: the one its snapshots name). The child's
            events continue in it under the child's run id unless it is restored with another.

    Raises:
        RunIdTakenError: ``new_run_id`` is taken: a snapshot, anchors or a run record of it in
            ``store``, or events of it in the journal the child continues.
        CheckpointError: ``new_run_id`` is blank or the parent's; ``at_seq`` is not a history
            point (the nearest are named); or as ``run_history``.
        DurableApprovalError: the child is suspended on approvals and ``store`` has no
            ``compare_and_set``.
    """
    child_id = js_trim(new_run_id)  # as OMA trims the run id a request id is derived from
    if not child_id or child_id != new_run_id or child_id == run_id:
        raise CheckpointError(
            f"new_run_id {new_run_id!r} must be a non-blank id without surrounding spaces, "
            f"other than the parent's {run_id!r}"
        )
    await _refuse_existing(store, child_id)
    timeline = await load_timeline(store, run_id, journal=journal, at=at_seq)
    state, started = timeline.fold_at(at_seq)
    child = _child(_mark_started(state, started), child_id, run_id, at_seq)
    await _refuse_recorded(store, child_id, journal, child.journal_ref)
    child = await _rebind_approvals(store, child, run_id)
    checkpoint = Checkpoint(store, run_id=child_id)
    # The child's latest snapshot is its own first anchor (its metadata carries the summary,
    # ``latest_anchor``): the text is written once; the child's first compaction copies it
    # before overwriting it (``RunWriter``), as it does any run's newest anchor.
    latest = latest_anchor(checkpoint, encode(child), child, "fork")
    if is_conditional_store(store):
        # One atomic write, refused if another fork took the id meanwhile: never overwrites.
        anchor_key = history_key(child_id, child.journal_watermark_seq or 0)
        checks = [Expect(anchor_key, None), Expect(latest.key, None)]
        if not await cast("ConditionalStore", store).apply(checks, [latest]):
            raise RunIdTakenError(child_id, "was created concurrently")
    else:
        await store.set(latest.key, latest.value, latest.metadata)
    return ForkInfo(run_id=child_id, parent_run_id=run_id, parent_seq=at_seq)


async def _refuse_existing(store: MemoryStore, child_id: str) -> None:
    if await store.get(checkpoint_key(child_id)) is not None:
        raise RunIdTakenError(child_id, "already exists")
    # Any anchor of the id refuses it (a history of another run's would mix with the child's);
    # the child's keys alone are listed. On a conditional store the write checks its own keys
    # again, atomically (``apply``): a fork racing this one is refused there.
    if await history_entries(store, child_id):
        raise RunIdTakenError(child_id, "already has a history")


async def _refuse_recorded(
    store: MemoryStore,
    child_id: str,
    journal: RunJournal | None,
    ref: dict[str, object] | None,
) -> None:
    """Refuse an id that a run record or the child's journal still knows.

    The child's journal is its parent's: events of the id left there (a deleted run's, in a
    JSONL file other runs share or a database journal an interrupted delete left) lie above the
    fork point, and a restore of the child would fold them as its own. A run record of the id
    (a run store's) would refuse every leased restore of the child.
    """
    if await store.get(run_record_key(child_id)) is not None:
        raise RunIdTakenError(child_id, "has a run record")
    if journal is None and ref is None:
        return
    source = open_journal_ref(ref, store) if journal is None else journal
    try:
        events = await read_run(source, child_id)
    finally:
        if journal is None:
            await source.close()
    if events:
        raise RunIdTakenError(
            child_id,
            f"has {len(events)} events in the journal (seqs {events[0].seq}..{events[-1].seq}), "
            "which a fork under that id would take for its own",
        )


def _mark_started(
    state: CheckpointSnapshot, started: tuple[StartedCall, ...]
) -> CheckpointSnapshot:
    """Every call started and uncommitted at the point marked dispatched, and listed in
    ``FORK_MARKED`` when the fork alone marked it (its tool's effect unknown here, D1)."""
    open_calls = [call for call in started if not call.has_result]
    names: dict[str, set[str]] = {}
    for entry in state.in_flight:
        scope = (entry.task_id, entry.assignee)
        ids = {call.call_id for call in open_calls if (call.task_id, call.agent_name) == scope}
        names.setdefault(entry.assignee, set()).update(
            item.call.name for item in entry.state.pending if item.call.id in ids
        )
    marked = mark_started_unsafe(state, open_calls, names)
    # A call the state already held dispatched was marked by its run, whose team said its tool
    # is unsafe: never listed. One listed by an earlier fork (a fork of a child at a point that
    # still folds from the child's first snapshot) stays listed while it is open.
    unsure = (_open_dispatched(marked) - _open_dispatched(state)) | (
        fork_marked(state) & _open_dispatched(marked)
    )
    return _with_fork_marks(marked, unsure)


FORK_MARKED = "forkMarkedDispatched"
"""Our member of a fork child's snapshot (decision D17): the calls ``fork_run`` marked dispatched
only because it cannot tell their tool's effect, ``[{"taskId", "assignee", "callId"}]``.

The encoder carries a member it does not model from the snapshot's source (``checkpoint.carry``),
and OMA's validator and ours ignore members they do not know: a child read by OMA keeps every
mark (it never re-runs the call). ``clear_fork_marks`` consumes it on the child's restore.
"""

CallKey = tuple[str, str, str]
"""A pending call by its in-flight entry and id: ``(task id, assignee, call id)``."""


def fork_marked(snapshot: CheckpointSnapshot) -> frozenset[CallKey]:
    """The calls ``snapshot`` lists in ``FORK_MARKED`` (none when it has no such member; an
    entry of another shape is skipped, so its call keeps its mark)."""
    listed = (snapshot.source or {}).get(FORK_MARKED)
    if not isinstance(listed, list):
        return frozenset()
    keys: set[CallKey] = set()
    for item in listed:
        if isinstance(item, dict):
            key = (item.get("taskId"), item.get("assignee"), item.get("callId"))
            if all(isinstance(part, str) for part in key):
                keys.add(cast("CallKey", key))
    return frozenset(keys)


def clear_fork_marks(
    snapshot: CheckpointSnapshot, safe: Mapping[str, Collection[str]]
) -> CheckpointSnapshot:
    """``snapshot`` with the dispatched mark of every call ``FORK_MARKED`` lists cleared when
    its tool is one of its agent's ``safe`` tools, and without the member.

    A restore runs it with the team (``safe``: per agent, the names of its tools that are not
    ``unsafe``), before the tail is folded: a cleared call that the tail shows started again
    is marked again only if its tool is unsafe (``mark_started_unsafe``), as after a crash
    (decision D1). A call whose agent or tool the team does not know keeps its mark. The member
    is dropped, so the restored run's snapshots do not carry it: their marks are the team's.
    """
    source = snapshot.source
    if source is None or FORK_MARKED not in source:
        return snapshot
    listed = fork_marked(snapshot)
    entries = []
    for entry in snapshot.in_flight:
        tools = safe.get(entry.assignee, ())
        pending = tuple(
            replace(item, dispatched=False)
            if item.dispatched
            and item.commit is None
            and item.call.name in tools
            and (entry.task_id, entry.assignee, item.call.id) in listed
            else item
            for item in entry.state.pending
        )
        if pending != entry.state.pending:
            entry = replace(entry, state=replace(entry.state, pending=pending))
        entries.append(entry)
    kept = {key: value for key, value in source.items() if key != FORK_MARKED}
    return replace(snapshot, in_flight=tuple(entries), source=kept)


def _open_dispatched(snapshot: CheckpointSnapshot) -> frozenset[CallKey]:
    return frozenset(
        (entry.task_id, entry.assignee, item.call.id)
        for entry in snapshot.in_flight
        for item in entry.state.pending
        if item.dispatched and item.commit is None
    )


def _with_fork_marks(
    snapshot: CheckpointSnapshot, unsure: frozenset[CallKey]
) -> CheckpointSnapshot:
    """``snapshot`` whose source lists ``unsure`` in ``FORK_MARKED`` (in the state's order), or
    holds no such member when it is empty."""
    source = {key: value for key, value in (snapshot.source or {}).items() if key != FORK_MARKED}
    listed = [
        {"taskId": entry.task_id, "assignee": entry.assignee, "callId": item.call.id}
        for entry in snapshot.in_flight
        for item in entry.state.pending
        if (entry.task_id, entry.assignee, item.call.id) in unsure
    ]
    if listed:
        source[FORK_MARKED] = listed
    if snapshot.source is None and not listed:
        return snapshot
    return replace(snapshot, source=source)


def _child(
    state: CheckpointSnapshot, child_id: str, parent_id: str, at_seq: int
) -> CheckpointSnapshot:
    identity = state.identity
    ref = state.journal_ref
    if ref is not None:
        # The journal held the parent's events through ``through``; none of the child's yet:
        # its events start above the fork point, so a restore must not look for lost ones.
        ref = {key: value for key, value in ref.items() if key != THROUGH_MEMBER}
    return replace(
        state,
        journal_ref=ref,
        run_id=child_id,
        identity=None if identity is None else replace(identity, run_id=child_id),
        revision=1,
        created_at=to_iso(utcnow()),
        forked_from=ForkedFrom(run_id=parent_id, seq=at_seq),
    )


async def _rebind_approvals(
    store: MemoryStore, child: CheckpointSnapshot, parent_id: str
) -> CheckpointSnapshot:
    """The child's own copy of every approval of the parent it holds, decided as the parent's.

    A snapshot refuses a request or decision of another run, so each one the point holds (a
    pending request, a decision, a call's request or decision) is re-created for the child.
    """
    requests = await _parent_requests(store, child, parent_id)
    if not requests:
        return child
    ledger = DurableApprovalLedger(require_atomic_store(store))
    bound: dict[str, tuple[ApprovalRequest, ApprovalDecision | None]] = {}
    for request in requests.values():
        bound[request.id] = await _rebind(ledger, store, request, child.run_id)

    def request_of(request: ApprovalRequest) -> ApprovalRequest:
        return bound[request.id][0] if request.id in bound else request

    def decision_of(decision: ApprovalDecision) -> ApprovalDecision:
        mine = bound.get(decision.request_id, (None, None))[1]
        if decision.request_id in bound and mine is None:
            raise CheckpointError(
                f"approval {decision.request_id} is decided in the run's snapshot but not in "
                "its ledger: the fork cannot bind that decision"
            )
        return decision if mine is None else mine

    entries = []
    for entry in child.in_flight:
        pending = tuple(
            replace(
                item,
                approval_request=None
                if item.approval_request is None
                else request_of(item.approval_request),
                approval_decision=None
                if item.approval_decision is None
                else decision_of(item.approval_decision),
            )
            for item in entry.state.pending
        )
        entries.append(replace(entry, state=replace(entry.state, pending=pending)))
    return replace(
        child,
        pending_approvals=tuple(request_of(r) for r in child.pending_approvals),
        approval_decisions=tuple(decision_of(d) for d in child.approval_decisions),
        in_flight=tuple(entries),
    )


async def _parent_requests(
    store: MemoryStore, child: CheckpointSnapshot, parent_id: str
) -> dict[str, ApprovalRequest]:
    found = {r.id: r for r in child.pending_approvals if r.run_id == parent_id}
    for entry in child.in_flight:
        for item in entry.state.pending:
            request = item.approval_request
            if request is not None and request.run_id == parent_id:
                found.setdefault(request.id, request)
    for decision in child.approval_decisions:
        if decision.run_id != parent_id or decision.request_id in found:
            continue
        record = await get_approval_record(store, decision.request_id)
        if record is None:
            raise CheckpointError(
                f"approval {decision.request_id} is decided in the run's snapshot but has no "
                "ledger row: the fork cannot bind that decision"
            )
        found[record.request.id] = record.request
    return found


async def _rebind(
    ledger: DurableApprovalLedger, store: MemoryStore, request: ApprovalRequest, child_id: str
) -> tuple[ApprovalRequest, ApprovalDecision | None]:
    """``request`` re-created for the child, decided there as the parent's ledger holds it."""
    mine = create_approval_request(
        run_id=child_id,
        scope=request.scope,
        boundary=request.boundary,
        content=request.content,
        reason=request.reason,
        requested_at=request.requested_at,
    )
    await ledger.ensure_request(mine)
    parent = await get_approval_record(store, request.id)
    decided = None if parent is None else parent.decision
    if decided is None:
        return mine, None
    value: Literal["approve", "reject"] = "approve" if decided.decision == "approved" else "reject"
    record = await ledger.decide(
        request_id=mine.id,
        request_hash=mine.request_hash,
        decision=value,
        reviewer=decided.reviewer,
        edited_input=decided.edited_input,  # an approval with edits stays bound to its edit
    )
    return mine, record.decision
