"""Dispatch marks: a record, outside a journal's cut-able tail, of how far a run's journal reached.

A journal-first run (D10) saves an ``unsafe`` tool's dispatch record (its ``tool/call`` event)
to the journal alone. Events above the last compaction's ``journalRef.through`` are known to
nobody but the journal: cut them off (a truncated file, deleted rows) and the restore would fold
a shorter tail without a trace, and run the dispatched call again (issue 18). So before an
``unsafe`` call runs, once its ``tool/call`` is durable, the run's writer also makes a
``DispatchMark`` durable: "the journal of run R held seq S, the dispatch of call C". A restore
whose journal holds the run only below a mark's seq has lost events: it refuses, or salvaged,
treats every marked call as outcome unknown (never re-run).

Each backend keeps its marks beside its events, never in them: JSONL in ``<journal>.marks``
(one line per mark, group-committed, fsynced), SQL in a ``<table>_marks`` table of the same
database, memory in the instance. The mark is written after the events it vouches for are
durable, so a crash between the two leaves a mark short of the journal, never past it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

if TYPE_CHECKING:
    from oma_actors.journal.base import RunJournal


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchMark:
    """The journal of ``run_id`` held ``seq``: the ``tool/call`` of ``call_id``, about to run.

    Attributes:
        run_id: the run.
        seq: the seq of the call's ``tool/call`` event (durable when the mark is written).
        task_id: the event's task.
        agent_name: the event's agent.
        call_id: the model-issued tool call id.
    """

    run_id: str
    seq: int
    task_id: str | None
    agent_name: str | None
    call_id: str

    def to_json(self) -> bytes:
        """One JSON line (without its newline), OMA's camelCase."""
        return orjson.dumps(
            {
                "runId": self.run_id,
                "seq": self.seq,
                "taskId": self.task_id,
                "agentName": self.agent_name,
                "callId": self.call_id,
            }
        )


def mark_from_json(raw: bytes | str) -> DispatchMark:
    """The mark a ``DispatchMark.to_json`` line holds.

    Raises:
        ValueError: not such a line (``orjson.JSONDecodeError`` is one).
    """
    data: Any = orjson.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("a dispatch mark is a JSON object")
    run_id, seq, call_id = data.get("runId"), data.get("seq"), data.get("callId")
    task_id, agent = data.get("taskId"), data.get("agentName")
    if (
        not isinstance(run_id, str)
        or not isinstance(call_id, str)
        or isinstance(seq, bool)
        or not isinstance(seq, int)
        or not (task_id is None or isinstance(task_id, str))
        or not (agent is None or isinstance(agent, str))
    ):
        raise ValueError(f"not a dispatch mark: {data!r}")
    return DispatchMark(run_id=run_id, seq=seq, task_id=task_id, agent_name=agent, call_id=call_id)


@runtime_checkable
class DispatchMarks(Protocol):
    """A journal that keeps dispatch marks beside its events (every built-in backend)."""

    async def mark(self, mark: DispatchMark) -> None:
        """Make ``mark`` durable; returns once it is (raises when it could not be)."""
        ...

    async def marks_of(self, run_id: str, above: int = 0) -> list[DispatchMark]:
        """The marks of ``run_id`` with ``seq > above``, in seq order."""
        ...


def marks_of_journal(journal: RunJournal) -> DispatchMarks | None:
    """``journal`` as a keeper of dispatch marks, or ``None`` when it keeps none (a custom
    ``RunJournal``: its tail's truncation stays undetectable, as before issue 18)."""
    return journal if isinstance(journal, DispatchMarks) else None


__all__ = ["DispatchMark", "DispatchMarks", "mark_from_json", "marks_of_journal"]
