"""What a sidecar process holds of one run in memory: its event log.

Sequence numbers are never reused, also across a crash, without writing every event: seqs are
handed out from blocks reserved in the run record (``seq_reserved_until``). A block is persisted
*before* any seq in it is used; a new process continues above the reservation. Events that only
lived in a process that died are reported to watchers as a gap.
"""

from __future__ import annotations

import asyncio
import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.record import SEQ_BLOCK
from sidecar.run_view import outcome_pb

if TYPE_CHECKING:
    from sidecar.record import Outcome, RunRecordV1, WireStatus

MAX_RETAINED = 20_000


class RunLog:
    """The retained events of one run and the cursor watchers follow.

    Appends are synchronous; watchers wait on :meth:`changed`. Seqs are only handed out below
    the persisted reservation: events that arrive while a new block is being persisted wait in
    ``_held`` (in order).
    """

    def __init__(self, run_id: str, *, next_seq: int, reserved_until: int) -> None:
        self.run_id = run_id
        self.events: list[pb.RunEvent] = []
        self.next_seq = next_seq
        self.reserved_until = reserved_until
        self._held: list[pb.RunEvent] = []
        self._changed = asyncio.Event()
        self.last_status: WireStatus = pb.RUN_STATUS_UNSPECIFIED
        self.published = 0  # events this process gave a seq (not history read from the store)

    @property
    def last_seq(self) -> int:
        """The seq of the newest event (0 when none is retained)."""
        return self.events[-1].seq if self.events else 0

    @property
    def last_used(self) -> int:
        """The last seq handed out (the seq before :attr:`next_seq`)."""
        return self.next_seq - 1

    def add(self, event: pb.RunEvent) -> bool:
        """Append ``event`` (its seq is set here); ``False`` when it waits for a reservation."""
        if self._held or self.next_seq > self.reserved_until:
            self._held.append(event)
            return False
        self._publish(event)
        return True

    def wanted_reservation(self) -> int:
        """The reservation to persist next: one block above what is reserved or used."""
        return max(self.reserved_until, self.next_seq - 1) + SEQ_BLOCK

    def extend_reservation(self, reserved_until: int) -> None:
        """A new block is durable: publish the held events."""
        self.reserved_until = max(self.reserved_until, reserved_until)
        while self._held and self.next_seq <= self.reserved_until:
            self._publish(self._held.pop(0))

    def skip_to(self, seq: int) -> None:
        """Hand out no seq below ``seq`` (seqs another process may have used)."""
        self.next_seq = max(self.next_seq, seq)

    def needs_block(self) -> bool:
        """Whether less than half a block is left."""
        return self.reserved_until - self.next_seq < SEQ_BLOCK // 2 or bool(self._held)

    def _publish(self, event: pb.RunEvent) -> None:
        event.seq = self.next_seq
        self.next_seq += 1
        self.published += 1
        if event.type == "run_status":
            self.last_status = event.run_status.status
        self.events.append(event)
        del self.events[: max(0, len(self.events) - MAX_RETAINED)]
        self.wake()

    def since(self, after_seq: int) -> list[pb.RunEvent]:
        """Retained events with seq > ``after_seq``."""
        if not self.events or after_seq >= self.last_seq:
            return []
        # Retained seqs increase but may jump (history from an earlier process), so bisect.
        start = bisect.bisect_right(self.events, after_seq, key=lambda event: event.seq)
        return self.events[start:]

    def changed(self) -> asyncio.Event:
        """An event set at the next append (or :meth:`wake`)."""
        return self._changed

    def wake(self) -> None:
        """Wake the watchers (also without an event: something they read elsewhere changed,
        the run's journal, sidecar.journal_watch)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def merge_history(self, events: list[pb.RunEvent]) -> None:
        """Append the events of ``events`` (another sidecar's saved history) newer than ours."""
        newer = [event for event in events if event.seq > self.last_seq]
        if not newer:
            return
        for event in newer:
            if event.type == "run_status":
                self.last_status = event.run_status.status
        self.events.extend(newer)
        del self.events[: max(0, len(self.events) - MAX_RETAINED)]
        self.next_seq = max(self.next_seq, self.last_seq + 1)
        self.wake()

    def restore_history(self, events: list[pb.RunEvent]) -> None:
        """Seed the log with persisted history (boot)."""
        if events:
            self.events = events[-MAX_RETAINED:]
            for event in reversed(self.events):
                if event.type == "run_status":
                    self.last_status = event.run_status.status
                    break


@dataclass(slots=True, kw_only=True)
class KnownRun:
    """A run as this process last read or wrote it, with its in-memory log."""

    text: str  # the stored text ``record`` was decoded from or encoded as
    record: RunRecordV1
    log: RunLog
    # The newest seq of the run's journal read here (``sidecar.journal_watch.stream_last_seq``):
    # the next look for its newest seq reads only above it, and none is needed once it was
    # read after the run ended for good (``journal_final``).
    journal_seq: int = 0
    journal_final: bool = False


def status_event(status: WireStatus, outcome: Outcome) -> pb.RunEvent:
    """The ``run_status`` event announcing ``status`` (no seq, run id or time yet)."""
    event = pb.RunEvent(type="run_status")
    event.run_status.status = status
    event.run_status.outcome.CopyFrom(outcome_pb(outcome))
    return event
