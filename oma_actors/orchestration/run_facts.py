"""The facts a run's task queue and approval gate report as they happen (decision D14).

The run actor owns the queue and the approval gate; each transition it makes is a fact it
reports, typed, to the run's journal at that moment (``journal_events.record_run_fact``),
never reconstructed by watching progress events or diffing states. Most facts are one OMA
event each (``task/status``, ``approval/request``); the two no event says (an assignment a
gate held back, an approval used up) make the journal-first writer's next save compact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from datetime import datetime

    from oma_actors.domain.approvals import ApprovalRequest

__all__ = [
    "Announced",
    "ApprovalUsedUp",
    "Failed",
    "HeldBack",
    "Requested",
    "RunFact",
    "Skipped",
    "Started",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Started:
    """The queue put a task in progress on ``agent``; ``updated_at`` is the queue's stamp.

    Journal-first, the stamp goes into the event, so the fold puts the task in progress exactly
    as the queue has it and the start needs no snapshot.
    """

    task_id: str
    agent: str
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Announced:
    """A completed task's completion was announced (after the save that made it durable)."""

    task_id: str
    agent: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed:
    """The queue failed a task (its own failure or a dependency's cascade) with ``error``."""

    task_id: str
    agent: str | None
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Skipped:
    """The queue skipped a task with ``reason``."""

    task_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Requested:
    """An approval request became durable (checkpoint and ledger) and is announced."""

    request: ApprovalRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldBack:
    """The queue assigned a task to ``agent`` and the dispatch gate held it back (no event)."""

    task_id: str
    agent: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalUsedUp:
    """The dispatch gate used an approved request up (spec AP-32; no event says so)."""

    request_id: str


RunFact: TypeAlias = Started | Announced | Failed | Skipped | Requested | HeldBack | ApprovalUsedUp
