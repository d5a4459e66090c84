"""Crash points by boundary: end the process at a named run or runner boundary (crash matrix 3.2).

A crash test names *where* the process dies by a durable boundary of the run, not by the bytes
of one store: ``"tool_commit:after"`` is "a tool call's commit record is durable, and nothing
after it happened", whether the save path is a snapshot file, a journal or a database. Every
save reports its boundary to the probe installed with ``boundaries.probing`` (``before`` the
write starts, ``after`` it returned, with ``durable`` telling whether it landed);
``crash_at(point)`` installs a probe that counts the reports matching ``point`` and, at the
``nth``, kills the process.

The kill is ``os._exit`` (M-exit): no ``finally`` block, ``atexit`` handler, buffered write or
loop shutdown runs, which is what a crash is. An ``asyncio`` cancellation or an exception would
run all of those and so prove nothing about a crash (crash matrix 1.5). ``block_until_killed``
is the M-kill variant: it announces ``READY`` and blocks so the parent can ``SIGKILL`` the
process while other threads still run.

A point's spelling is ``boundary:phase[:nth][@task_id]``, for example ``"terminal:before"``,
``"tool_commit:after:2"`` or ``"task_completed:after@alpha"``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NoReturn, cast, get_args

from oma_actors.checkpoint.boundaries import BOUNDARIES, Boundary, BoundaryPoint, Phase, probing
from oma_actors.errors import ConfigurationError

CRASH_EXIT = 86
"""The exit code of a crashed process (crash matrix 3.2): a test tells a crash from a bug by it."""

PHASES: tuple[str, ...] = get_args(Phase)


class CrashPointError(ConfigurationError, ValueError):
    """A crash point names an unknown boundary or phase, or a count or exit code out of range.

    Attributes:
        spelling: the crash point as written.
        problem: what is wrong with it, in words.
    """

    def __init__(self, spelling: str, problem: str) -> None:
        super().__init__(f"bad crash point {spelling!r}: {problem}")
        self.spelling = spelling
        self.problem = problem


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashPoint:
    """Where a process dies: the ``nth`` report of ``boundary`` in ``phase`` (for ``task_id``).

    ``after`` counts only saves that are known durable (``BoundaryPoint.durable is True``): a
    crash "after the commit landed" must leave the commit in the store, and a save that failed
    leaves the run at the previous boundary, which is a different crash point.

    Attributes:
        boundary: a name from ``boundaries.BOUNDARIES``.
        phase: ``before`` the write starts, or ``after`` it is durable.
        nth: which matching report kills the process (1-based).
        task_id: only reports about this task count; ``None`` counts every report.
        exit_code: the process's exit code.

    Raises:
        CrashPointError: an unknown boundary or phase, ``nth < 1``, or an exit code outside
            1..255 (0 would look like success).
    """

    boundary: Boundary
    phase: Phase
    nth: int = 1
    task_id: str | None = None
    exit_code: int = CRASH_EXIT

    def __post_init__(self) -> None:
        """Validate every field, so a typo fails the test instead of never crashing."""
        if self.boundary not in BOUNDARIES:
            known = ", ".join(sorted(BOUNDARIES))
            raise CrashPointError(
                self.spelling, f"unknown boundary {self.boundary!r} (known: {known})"
            )
        if self.phase not in PHASES:
            raise CrashPointError(self.spelling, f"unknown phase {self.phase!r} (before or after)")
        if self.nth < 1:
            raise CrashPointError(self.spelling, f"nth must be at least 1, got {self.nth}")
        if not 1 <= self.exit_code <= 255:
            raise CrashPointError(self.spelling, f"exit code must be 1..255, got {self.exit_code}")
        if self.task_id == "":
            raise CrashPointError(self.spelling, "the task id after '@' is empty")

    @classmethod
    def parse(cls, spelling: str, *, exit_code: int = CRASH_EXIT) -> CrashPoint:
        """Read ``boundary:phase[:nth][@task_id]``.

        Raises:
            CrashPointError: the spelling has the wrong shape, or names an unknown boundary or
                phase, or its ``nth`` is not a positive integer.
        """
        head, at, task_id = spelling.partition("@")
        parts = head.split(":")
        if len(parts) not in (2, 3):
            raise CrashPointError(spelling, "expected boundary:phase[:nth][@task_id]")
        boundary, phase = parts[0], parts[1]
        nth = 1
        if len(parts) == 3:
            if not parts[2].isdigit():
                raise CrashPointError(spelling, f"nth must be a positive integer, got {parts[2]!r}")
            nth = int(parts[2])
            if nth < 1:
                raise CrashPointError(spelling, f"nth must be at least 1, got {nth}")
        if boundary not in BOUNDARIES:
            known = ", ".join(sorted(BOUNDARIES))
            raise CrashPointError(spelling, f"unknown boundary {boundary!r} (known: {known})")
        if phase not in PHASES:
            raise CrashPointError(spelling, f"unknown phase {phase!r} (before or after)")
        return cls(
            boundary=cast("Boundary", boundary),
            phase=cast("Phase", phase),
            nth=nth,
            task_id=task_id if at else None,
            exit_code=exit_code,
        )

    @property
    def spelling(self) -> str:
        """The point written as ``parse`` reads it (``nth`` shown only when it is not 1)."""
        text = f"{self.boundary}:{self.phase}"
        if self.nth != 1:
            text += f":{self.nth}"
        if self.task_id is not None:
            text += f"@{self.task_id}"
        return text

    def matches(self, point: BoundaryPoint) -> bool:
        """Whether ``point`` is a report this crash point counts."""
        if point.boundary != self.boundary or point.phase != self.phase:
            return False
        if self.task_id is not None and point.task_id != self.task_id:
            return False
        return self.phase == "before" or point.durable is True


CrashHandler = Callable[[CrashPoint, BoundaryPoint], None]
"""Called once, at the report that reaches the point's ``nth``; the default ends the process."""


def exit_process(point: CrashPoint, at: BoundaryPoint) -> NoReturn:
    """M-exit: name the boundary on stderr, then ``os._exit(point.exit_code)``.

    The line is written with ``os.write`` because ``os._exit`` discards Python's buffers.
    """
    os.write(2, f"crash_at: os._exit({point.exit_code}) at {_where(point, at)}\n".encode())
    os._exit(point.exit_code)


def block_until_killed(point: CrashPoint, at: BoundaryPoint) -> NoReturn:
    """M-kill: print ``READY <boundary>`` on stdout, then block until the parent kills us.

    The process blocks reading stdin (the parent holds the pipe and never writes), so the
    event loop stops right at the boundary while threads the runtime started keep running:
    the parent's ``SIGKILL`` then catches anything an ``os._exit`` would hide. If the parent
    goes away instead (end of file), the process exits with ``exit_code + 1``.
    """
    os.write(1, f"READY {_where(point, at)}\n".encode())
    os.read(0, 1)
    os._exit(min(point.exit_code + 1, 255))


def _where(point: CrashPoint, at: BoundaryPoint) -> str:
    return (
        f"{point.spelling} (run {at.run_id}, task {at.task_id}, revision {at.revision}, "
        f"durable {at.durable})"
    )


class CrashProbe:
    """The probe ``crash_at`` installs: counts matching reports and crashes at the ``nth``.

    Attributes:
        point: where to crash.
        matched: matching reports seen so far.
        seen: every report seen, matching or not (what the run reported, in order).
        fired: the report the handler was called for, once it was.
    """

    def __init__(self, point: CrashPoint, on_crash: CrashHandler = exit_process) -> None:
        self.point = point
        self.matched = 0
        self.seen: list[BoundaryPoint] = []
        self.fired: BoundaryPoint | None = None
        self._on_crash = on_crash

    def __call__(self, at: BoundaryPoint) -> None:
        """Observe one report; call the handler if it is the ``nth`` match."""
        self.seen.append(at)
        if not self.point.matches(at):
            return
        self.matched += 1
        if self.matched == self.point.nth:
            self.fired = at
            self._on_crash(self.point, at)


@contextmanager
def crash_at(
    point: CrashPoint | str, *, on_crash: CrashHandler = exit_process
) -> Iterator[CrashProbe]:
    """Crash the runs started inside this block at ``point``.

    The probe lives in a context variable (``boundaries.probing``), so only runs started in
    this block, and the tasks they spawn, are watched.

    Args:
        point: a ``CrashPoint`` or its spelling (``"tool_commit:after:2@alpha"``).
        on_crash: what "crash" means; ``exit_process`` by default, ``block_until_killed`` for
            the SIGKILL variant, or a recorder in a test of the probe itself.

    Yields:
        The installed probe (its counts show what the run reported).

    Raises:
        CrashPointError: ``point`` is a spelling that does not parse.
    """
    if isinstance(point, str):
        point = CrashPoint.parse(point)
    probe = CrashProbe(point, on_crash)
    with probing(probe):
        yield probe
