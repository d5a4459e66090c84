"""Record changes that fence a sidecar out of a run another sidecar took over.

On a store shared by several sidecars a run can change hands while an attempt still executes:
its lease expired (the sidecar stalled) and a sibling adopted it (``sidecar.failover``), or a
``RestoreRun`` elsewhere claimed it. The old attempt must then write nothing more into the run's
record: every status it writes goes through :func:`still_mine`, checked inside the record's
compare-and-set, so the check holds against the sibling's concurrent claim. Every claim counts
a new attempt in that compare-and-set, so no two claims hold one attempt: the attempt alone
names the claim an attempt belongs to (the owner is the run record's, ``sidecar.authority``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Callable

    from sidecar.record import RunRecordV1

Change: TypeAlias = "Callable[[RunRecordV1], RunRecordV1]"


class NotMine(Exception):
    """Raised inside a record change: a later attempt (a claim here or elsewhere) took the run."""


def still_mine(attempt: int) -> Change:
    """A change refusing (``NotMine``) a record that a later attempt (a later claim) took."""

    def change(record: RunRecordV1) -> RunRecordV1:
        if record.attempt != attempt:
            raise NotMine(record.run_id)
        return record

    return change


def both(first: Change, second: Change) -> Change:
    """``second`` applied after ``first`` (``first`` may refuse the write)."""
    return lambda record: second(first(record))
