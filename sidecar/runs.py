"""The run registry: run records persisted in the state store, and each run's event log.

Records live under ``__oma_sidecar__/run/<run_id>`` in the sidecar's state store (``--store``),
one JSON document per run holding the StartRun request (the spec RestoreRun rebuilds the team
from), the status, the attempt and the sequence reservation. Finished runs also keep their event
history under ``__oma_sidecar__/events/<run_id>``.

Sequence numbers are never reused, also across a crash, without writing every event: seqs are
handed out from blocks reserved in the record (hi/lo). A block is persisted *before* any seq in it
is used; a new process continues above the reservation. Events that only lived in a process that
died are reported to watchers as a gap.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.convert import now, task_counts, timestamp

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from datetime import datetime

    from oma_actors import MemoryStore

logger = logging.getLogger(__name__)

RUN_PREFIX = "__oma_sidecar__/run/"
EVENTS_PREFIX = "__oma_sidecar__/events/"
SEQ_BLOCK = 1024
MAX_RETAINED = 20_000
TERMINAL = frozenset({pb.RUN_STATUS_COMPLETED, pb.RUN_STATUS_CANCELLED})
FINISHED = TERMINAL | {pb.RUN_STATUS_FAILED, pb.RUN_STATUS_INTERRUPTED, pb.RUN_STATUS_SUSPENDED}
ACTIVE = frozenset({pb.RUN_STATUS_QUEUED, pb.RUN_STATUS_RUNNING})


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """Everything the sidecar knows about one run; mutated only by the registry and executor."""

    run_id: str
    request_id: str
    request: pb.StartRunRequest
    status: pb.RunStatus = pb.RUN_STATUS_QUEUED
    attempt: int = 1
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    outcome: pb.Outcome = field(default_factory=pb.Outcome)
    tasks: dict[str, pb.TaskState] = field(default_factory=dict)
    result: pb.RunResult | None = None
    pending_approvals: list[str] = field(default_factory=list)
    store_uri: str = ""
    seq_reserved_until: int = 0
    cancel_requested: bool = False

    def to_json(self) -> str:
        """The persisted form."""
        document: dict[str, Any] = {
            "version": 1,
            "run_id": self.run_id,
            "request_id": self.request_id,
            "request": _b64(self.request),
            "status": pb.RunStatus.Name(self.status),
            "attempt": self.attempt,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "outcome": {"code": self.outcome.code, "message": self.outcome.message},
            "tasks": [_b64(task) for task in self.tasks.values()],
            "result": _b64(self.result) if self.result is not None else None,
            "pending_approvals": self.pending_approvals,
            "store_uri": self.store_uri,
            "seq_reserved_until": self.seq_reserved_until,
        }
        return json.dumps(document, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        """Read a persisted record (``ValueError`` / ``KeyError`` when it is malformed)."""
        from datetime import datetime

        raw = json.loads(text)
        if raw.get("version") != 1:
            raise ValueError(f"unknown run record version {raw.get('version')!r}")
        record = cls(
            run_id=raw["run_id"],
            request_id=raw["request_id"],
            request=pb.StartRunRequest.FromString(base64.b64decode(raw["request"])),
            status=pb.RunStatus.Value(raw["status"]),
            attempt=int(raw["attempt"]),
            created_at=datetime.fromisoformat(raw["created_at"]),
            updated_at=datetime.fromisoformat(raw["updated_at"]),
            outcome=pb.Outcome(**raw["outcome"]),
            result=(
                pb.RunResult.FromString(base64.b64decode(raw["result"])) if raw["result"] else None
            ),
            pending_approvals=list(raw.get("pending_approvals", [])),
            store_uri=raw.get("store_uri", ""),
            seq_reserved_until=int(raw["seq_reserved_until"]),
        )
        for item in raw["tasks"]:
            task = pb.TaskState.FromString(base64.b64decode(item))
            record.tasks[task.id] = task
        return record


def _b64(message: Any) -> str:
    return base64.b64encode(message.SerializeToString(deterministic=True)).decode("ascii")


class RunLog:
    """The retained events of one run and the cursor watchers follow.

    Appends are synchronous (``on_progress`` is a plain callback); watchers wait on
    :meth:`wait_beyond`. Seqs are only handed out below the persisted reservation: events that
    arrive while a new block is being persisted wait in ``_held`` (in order).
    """

    def __init__(self, run_id: str, *, next_seq: int, reserved_until: int) -> None:
        self.run_id = run_id
        self.events: list[pb.RunEvent] = []
        self.first_seq = next_seq  # the oldest seq a watcher can still get from memory
        self.next_seq = next_seq
        self.reserved_until = reserved_until
        self._held: list[pb.RunEvent] = []
        self._changed = asyncio.Event()
        self.last_status: pb.RunStatus = pb.RUN_STATUS_UNSPECIFIED

    @property
    def last_seq(self) -> int:
        """The seq of the newest event (0 when none is retained)."""
        return self.events[-1].seq if self.events else 0

    def add(self, event: pb.RunEvent) -> bool:
        """Append ``event`` (its seq is set here); ``False`` when it waits for a reservation."""
        if self._held or self.next_seq > self.reserved_until:
            self._held.append(event)
            return False
        self._publish(event)
        return True

    def extend_reservation(self, reserved_until: int) -> None:
        """A new block is durable: publish the held events."""
        self.reserved_until = max(self.reserved_until, reserved_until)
        while self._held and self.next_seq <= self.reserved_until:
            self._publish(self._held.pop(0))

    def needs_block(self) -> bool:
        """Whether less than half a block is left."""
        return self.reserved_until - self.next_seq < SEQ_BLOCK // 2 or bool(self._held)

    def _publish(self, event: pb.RunEvent) -> None:
        event.seq = self.next_seq
        self.next_seq += 1
        if event.type == "run_status":
            self.last_status = event.run_status.status
        self.events.append(event)
        if len(self.events) > MAX_RETAINED:
            drop = len(self.events) - MAX_RETAINED
            del self.events[:drop]
            self.first_seq = self.events[0].seq
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def since(self, after_seq: int) -> list[pb.RunEvent]:
        """Retained events with seq > ``after_seq``."""
        if not self.events or after_seq >= self.last_seq:
            return []
        # Retained seqs increase but may jump (history from an earlier process), so bisect.
        start = bisect.bisect_right(self.events, after_seq, key=lambda event: event.seq)
        return self.events[start:]

    def changed(self) -> asyncio.Event:
        """An event set at the next append."""
        return self._changed

    def restore_history(self, events: list[pb.RunEvent]) -> None:
        """Seed the log with persisted history (boot)."""
        if events:
            self.events = events[-MAX_RETAINED:]
            self.first_seq = self.events[0].seq
            for event in reversed(self.events):
                if event.type == "run_status":
                    self.last_status = event.run_status.status
                    break


class RunRegistry:
    """Run records and logs, persisted through ``store``.

    Args:
        store: the state store.
        spawn: schedules a background coroutine (owned by the server's task group).
    """

    def __init__(
        self, store: MemoryStore, *, spawn: Callable[[Coroutine[Any, Any, None]], object]
    ) -> None:
        self._store = store
        self._spawn = spawn
        self.records: dict[str, RunRecord] = {}
        self.logs: dict[str, RunLog] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._reserving: set[str] = set()
        self.by_request: dict[str, str] = {}

    @property
    def store(self) -> MemoryStore:
        """The state store."""
        return self._store

    async def load(self) -> list[RunRecord]:
        """Read every persisted record; runs left active are marked interrupted.

        Returns the interrupted records.
        """
        interrupted: list[RunRecord] = []
        for entry in await self._store.list():
            if not entry.key.startswith(RUN_PREFIX):
                continue
            try:
                record = RunRecord.from_json(entry.value)
            except (ValueError, KeyError, TypeError) as exc:
                logger.error("skipping unreadable run record %s: %s", entry.key, exc)
                continue
            self.records[record.run_id] = record
            self.by_request[record.request_id] = record.run_id
            start = record.seq_reserved_until + 1
            log = RunLog(record.run_id, next_seq=start, reserved_until=record.seq_reserved_until)
            self.logs[record.run_id] = log
            history = await self._store.get(EVENTS_PREFIX + record.run_id)
            if history is not None:
                log.restore_history(_decode_events(history.value))
            if record.status in ACTIVE:
                interrupted.append(record)
        for record in interrupted:
            await self.set_status(
                record,
                pb.RUN_STATUS_INTERRUPTED,
                pb.Outcome(code="interrupted", message="the sidecar stopped while the run ran"),
            )
        return interrupted

    async def create(self, record: RunRecord) -> None:
        """Register a new run and persist it with its first seq block."""
        record.seq_reserved_until = SEQ_BLOCK
        self.records[record.run_id] = record
        self.by_request[record.request_id] = record.run_id
        self.logs[record.run_id] = RunLog(record.run_id, next_seq=1, reserved_until=0)
        written = await self.persist(record)
        self.logs[record.run_id].extend_reservation(written)

    async def persist(self, record: RunRecord) -> int:
        """Write the record as it is now; returns the seq reservation that is now durable.

        Writes of one record are serialized and each writes the record's state at its turn, so
        the last write holds the newest state; reservations only grow.
        """
        lock = self._locks.setdefault(record.run_id, asyncio.Lock())
        async with lock:
            reserved = record.seq_reserved_until
            await self._store.set(RUN_PREFIX + record.run_id, record.to_json())
            return reserved

    async def persist_history(self, record: RunRecord) -> None:
        """Keep a finished run's events for watchers after a restart."""
        log = self.logs[record.run_id]
        encoded = json.dumps([_b64(event) for event in log.events], separators=(",", ":"))
        await self._store.set(EVENTS_PREFIX + record.run_id, encoded)

    def emit(self, record: RunRecord, event: pb.RunEvent) -> None:
        """Append an event to the run's log, stamping attempt and time."""
        log = self.logs[record.run_id]
        event.run_id = record.run_id
        event.attempt = record.attempt
        if not event.HasField("time"):
            event.time.CopyFrom(timestamp(now()))
        _track_task(record, event)
        log.add(event)
        if log.needs_block() and record.run_id not in self._reserving:
            self._reserving.add(record.run_id)
            self._spawn(self._reserve(record))

    async def _reserve(self, record: RunRecord) -> None:
        log = self.logs[record.run_id]
        try:
            while log.needs_block():
                wanted = max(log.reserved_until, log.next_seq - 1) + SEQ_BLOCK
                record.seq_reserved_until = max(record.seq_reserved_until, wanted)
                log.extend_reservation(await self.persist(record))
        finally:
            self._reserving.discard(record.run_id)

    async def set_status(
        self, record: RunRecord, status: pb.RunStatus, outcome: pb.Outcome | None = None
    ) -> None:
        """Change the status, persist it, then announce it as a ``run_status`` event."""
        record.status = status
        record.updated_at = now()
        if outcome is not None:
            record.outcome = outcome
        log = self.logs[record.run_id]
        if log.needs_block():
            wanted = max(log.reserved_until, log.next_seq - 1) + SEQ_BLOCK
            record.seq_reserved_until = max(record.seq_reserved_until, wanted)
        log.extend_reservation(await self.persist(record))
        event = pb.RunEvent(type="run_status")
        event.run_status.status = status
        event.run_status.outcome.CopyFrom(record.outcome)
        self.emit(record, event)
        if status in FINISHED:
            await self.persist_history(record)

    def run_message(self, record: RunRecord, *, full: bool) -> pb.Run:
        """The wire form of a run."""
        request = record.request
        checkpoint = request.checkpoint
        message = pb.Run(
            run_id=record.run_id,
            mode=_MODE.get(request.WhichOneof("mode") or "", pb.RUN_MODE_UNSPECIFIED),
            status=record.status,
            attempt=record.attempt,
            request_id=record.request_id,
            created_at=timestamp(record.created_at),
            updated_at=timestamp(record.updated_at),
            outcome=record.outcome,
            task_counts=task_counts(list(record.tasks.values())),
            pending_approval_ids=record.pending_approvals,
            last_event_seq=self.logs[record.run_id].last_seq,
            checkpoint=pb.CheckpointRef(
                enabled=not checkpoint.disabled,
                store_uri=record.store_uri,
                key=checkpoint.key or f"__oma_checkpoint__/{record.run_id}/latest",
            ),
        )
        if request.HasField("metadata"):
            message.metadata.CopyFrom(request.metadata)
        if full:
            message.tasks.extend(record.tasks.values())
            if record.result is not None:
                message.result.CopyFrom(record.result)
        return message


_MODE = {"goal": pb.RUN_MODE_TEAM, "tasks": pb.RUN_MODE_TASKS, "plan": pb.RUN_MODE_PLAN}


def _track_task(record: RunRecord, event: pb.RunEvent) -> None:
    """Keep the record's task table current from task events."""
    if event.WhichOneof("detail") != "task_status" or not event.task_id:
        return
    task = record.tasks.get(event.task_id)
    if task is None:
        task = pb.TaskState(id=event.task_id)
        fields = event.data.fields
        if "title" in fields:
            task.title = fields["title"].string_value
        record.tasks[event.task_id] = task
    task.status = event.task_status.status
    if event.agent:
        task.assignee = event.agent
    if event.task_status.reason:
        task.result = event.task_status.reason


def _decode_events(text: str) -> list[pb.RunEvent]:
    try:
        return [pb.RunEvent.FromString(base64.b64decode(item)) for item in json.loads(text)]
    except (ValueError, TypeError) as exc:
        logger.error("unreadable event history: %s", exc)
        return []


def event_to_json(event: pb.RunEvent) -> dict[str, Any]:
    """An event as JSON (for logs and the CLI)."""
    converted: dict[str, Any] = json_format.MessageToDict(event)
    return converted
