"""Boot: read the registry, adopt records of the older format, interrupt this owner's runs.

A sidecar that stops while runs execute leaves their records active. When it starts again (the
same owner id, see ``sidecar.owner``) those runs are no longer running anywhere, so it marks
them interrupted; ``RestoreRun`` resumes them. A run of another owner is never touched, also when
active: on a shared store it may be running in a sibling right now.

Both decisions are made inside the record's compare-and-set write, on the record as stored, so a
sibling that restores (and so takes over) a run or adopts a record between this sidecar's read
and its write wins, and this sidecar leaves that run alone.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from oma_actors import StoreError
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.record import Outcome

if TYPE_CHECKING:
    from sidecar.record import RunRecordV1
    from sidecar.runs import RunRegistry

logger = logging.getLogger(__name__)

INTERRUPTED = Outcome(code="interrupted", message="the sidecar stopped while the run ran")


class _NotOurs(Exception):
    """Raised inside a record change: the run is not this sidecar's to change."""


async def recover(registry: RunRegistry) -> list[RunRecordV1]:
    """Load every record; return this owner's runs that were active, now marked interrupted.

    A record of the format before owners existed (``owner_id == ""``) is adopted first:
    rewritten in schema 1 with this owner. It was written by a sidecar that assumed it was alone
    on its store, and the first sidecar to start on that store takes its place.
    """
    owner = registry.owner_id

    def adopt(record: RunRecordV1) -> RunRecordV1:
        if record.owner_id:
            raise _NotOurs  # a sibling adopted it first
        return replace(record, owner_id=owner)

    def still_ours(record: RunRecordV1) -> RunRecordV1:
        if record.owner_id != owner or not record.active:
            raise _NotOurs
        return record

    interrupted: list[RunRecordV1] = []
    for record in await registry.query():
        try:
            if not record.owner_id:
                record = await registry.update(record.run_id, adopt)
            if record.active:
                interrupted.append(
                    await registry.set_status(
                        record.run_id, pb.RUN_STATUS_INTERRUPTED, INTERRUPTED, change=still_ours
                    )
                )
        except _NotOurs:
            continue
        except StoreError as exc:
            # A store that refuses the write (full, say) must not keep the sidecar from
            # booting: the run stays as recorded, readable, and RestoreRun resumes it later.
            logger.warning("run %s: not marked interrupted at boot: %s", record.run_id, exc)
    return interrupted
