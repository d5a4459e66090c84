"""``JournalEvent``: one line of a run journal, OMA's event object as a typed value (spec 17.2).

The JSONL a journal writes is OMA's: the base fields (``seq``, ``timestampUnixMs``, ``runId``,
``attempt``, ``taskId``, ``agentName``, ``sourceEventSeqs``) and the variant's own fields side by
side at the top level. Here the variant's fields live in ``data`` under OMA's names (e.g.
``data["watermarkSeq"]``), so a field OMA adds later survives a read and a re-write unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ASSISTANT_MESSAGE = "assistant/message"
USER_MESSAGE = "user/message"
TURN_END = "turn/end"
TOOL_CALL = "tool/call"
TOOL_RESULT = "tool/result"
CONTEXT_REPLACE = "context/replace"
TASK_STATUS = "task/status"
RUN_START = "run/start"
"""OMA's names of the event types a tail fold reads (spec 17.2, JR-14), spelled once."""

FOLDED_TYPES = frozenset(
    {ASSISTANT_MESSAGE, USER_MESSAGE, TURN_END, TOOL_CALL, TOOL_RESULT, CONTEXT_REPLACE}
)
"""The event types that change an in-flight entry when a tail is folded (JR-14; we also fold
``context/replace``, which OMA skips, so a restore resumes with the context the model saw)."""

RECORDED_RESULT = "recorded"
"""The member of a ``tool_result`` block in a journal-first ``user/message`` (origin
``tool_results``) that stands for the block: the seq of the ``tool/result`` event holding it
(issue 19: each output reaches the journal once). Such a block has no ``content``; the fold
takes the block from the call's commit, which that ``tool/result`` made (OMA's mode never
writes one)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalEvent:
    """One journal event.

    Attributes:
        seq: strictly increasing per run, across attempts (spec JR-05).
        type: OMA's event type, e.g. ``"assistant/message"`` or ``"checkpoint/saved"``.
        run_id: the run.
        attempt: the attempt that recorded it.
        timestamp_unix_ms: when it was recorded, in Unix milliseconds.
        task_id: the task it belongs to, if any.
        agent_name: the agent it belongs to, if any.
        trace_id: OMA's ``traceId``: the OpenTelemetry trace current when it was recorded,
            only when tracing is on (32 hex).
        span_id: OMA's ``spanId``: that trace's current span (16 hex).
        source_event_seqs: the events it derives from (lineage, spec JR-07), if recorded.
        data: the variant's own fields, by OMA's names.
    """

    seq: int
    type: str
    run_id: str
    attempt: int
    timestamp_unix_ms: int
    task_id: str | None = None
    agent_name: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    source_event_seqs: list[int] | None = None
    data: dict[str, Any] = field(default_factory=dict)
