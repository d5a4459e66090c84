"""Which host tool calls of a restored attempt may have been delivered before it.

``ToolCall.redelivery`` tells a host that a call's side effect may already have happened. In a
restored (or adopted) attempt that holds only for the calls the model issued before the restore
and that had no committed result then: the restored runner runs exactly those again, with their
old ids. A call the model issues after the restore is new, whatever the attempt number (issue
24, item 9). The calls are read where the restore reads them: the latest checkpoint with its
journal tail folded in. A call suspended on an approval was never delivered (the approval comes
before the delivery), so it does not count.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from oma_actors import OmaError
from oma_actors.checkpoint import Checkpoint, fold_tail, read_journal_tail

if TYPE_CHECKING:
    from oma_actors.checkpoint import CheckpointSnapshot
    from oma_actors.journal import RunJournal
    from oma_actors.stores import MemoryStore
    from sidecar.record import RunRecordV1

logger = logging.getLogger(__name__)


async def issued_before(
    record: RunRecordV1, store: MemoryStore, journal: RunJournal | None
) -> frozenset[str] | None:
    """Idempotency keys of the calls a restore of ``record`` runs again.

    ``None`` when the checkpoint or the journal cannot be read: then every call of the attempt
    counts as a possible redelivery (the safe side for a host deduplicating side effects).
    """
    try:
        snapshot = await latest_state(record, store, journal)
    except (OmaError, OSError, ValueError) as exc:
        logger.warning("run %s: cannot tell earlier tool calls (%s)", record.run_id, exc)
        return None
    if snapshot is None:
        return frozenset()
    return frozenset(
        f"{record.run_id}:{item.task_id}:{pending.call.id}"
        for item in snapshot.in_flight
        for pending in item.state.pending
        if pending.commit is None and pending.approval_request is None
    )


async def latest_state(
    record: RunRecordV1, store: MemoryStore, journal: RunJournal | None
) -> CheckpointSnapshot | None:
    """The run's state as a restore would read it: its latest checkpoint with the journal's
    tail folded in (``None``: no checkpoint yet).

    Raises:
        OmaError, OSError, ValueError: the checkpoint or the journal cannot be read.
    """
    checkpoint = Checkpoint(store, run_id=record.run_id, key=record.request.checkpoint.key or None)
    snapshot = await checkpoint.load_latest()
    if snapshot is not None and journal is not None:
        snapshot = fold_tail(snapshot, await read_journal_tail(journal, snapshot)).snapshot
    return snapshot
