"""Named durable boundaries of a run, and the probe that observes them (for crash tests).

Every write of durable run state goes through one ``RunWriter`` and names the boundary it
makes durable: a runner boundary (the turn's kinds, spec RN-04) or a run boundary (admission,
a task completion, the synthesis, a suspension, a rejection). The writer reports each boundary
twice, ``before`` the write starts and ``after`` it returned, to the probe installed with
``probing()`` in the current context. Production code installs none; the test kit's
``crash_at`` installs one that kills the process at a named boundary, so one crash matrix runs
unchanged against any save path (snapshot, journal, database).

The probe lives in a ``ContextVar``: tasks spawned by a run inherit it, two runs in one process
can carry different probes, and nothing is process-global.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from oma_actors.domain.inflight import BoundaryKind

if TYPE_CHECKING:
    from collections.abc import Iterator

RunBoundary = Literal[
    "admission",
    "task_completed",
    "run_suspended",
    "synthesis",
    "plan_suspended",
    "approval_rejected",
]
"""Run-level boundaries: the admission snapshot (D3), a completed task (SV-01), the drained
suspension, the stored synthesis (D4), the plan suspension (AP-23) and the rejection terminal
(AP-31)."""

RunnerBoundary = BoundaryKind
"""Runner boundaries, one per ``BoundaryKind`` a runner reports (spec RN-04)."""

Boundary = RunBoundary | RunnerBoundary

BOUNDARIES: frozenset[str] = frozenset(get_args(RunBoundary) + get_args(RunnerBoundary))
"""Every boundary name, for validating a crash point's spelling."""

STRICT_BOUNDARIES: frozenset[str] = frozenset(
    {"tool_dispatch", "suspended", "approval_requested", "plan_suspended", "approval_rejected"}
)
"""Boundaries whose save must be durable before the run goes on (decision D2): an unsafe
tool's dispatch record, and every suspension or rejection a person or a restore relies on."""

Phase = Literal["before", "after"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundaryPoint:
    """One report of a boundary to the probe.

    Attributes:
        run_id: the run.
        boundary: which boundary.
        phase: ``before`` the write starts, or ``after`` it returned.
        task_id: the task whose state the boundary records, if any.
        revision: the revision being written (``before``) or written (``after``, when durable).
        durable: ``None`` before the write; after it, whether the write is known durable.
    """

    run_id: str
    boundary: Boundary
    phase: Phase
    task_id: str | None = None
    revision: int = 0
    durable: bool | None = None


BoundaryProbe = Callable[[BoundaryPoint], None]

_PROBE: ContextVar[BoundaryProbe | None] = ContextVar("oma_boundary_probe", default=None)


@contextmanager
def probing(probe: BoundaryProbe) -> Iterator[None]:
    """Install ``probe`` for the runs started inside this block (and the tasks they spawn)."""
    token = _PROBE.set(probe)
    try:
        yield
    finally:
        _PROBE.reset(token)


def installed_probe() -> BoundaryProbe | None:
    """The probe installed in the current context, or ``None`` (production: always ``None``).

    For a caller that reports at every save: it builds its ``BoundaryPoint`` only when a probe
    will see it (two points per journal-only boundary, about 2 us of CPU, issue 19).
    """
    return _PROBE.get()


def report(point: BoundaryPoint) -> None:
    """Hand ``point`` to the installed probe, if any.

    A probe that raises breaks the save it observes: that is how a test injects a fault, and
    production code installs no probe.
    """
    probe = _PROBE.get()
    if probe is not None:
        probe(point)
