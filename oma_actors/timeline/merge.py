"""Merge a task's turns from its snapshot with its turns from the journal.

The snapshot holds every turn of a task (its messages) but not which attempt made it; the
journal says which attempt did what, but appends are best-effort: a crash can take the last
events of the interrupted attempt with it. So the snapshot's turns are the skeleton, and each is
replaced by the journal's turn with the same tool calls (or the same text) when there is one.

A snapshot turn the journal lost, just before a turn of a later attempt, was in flight when that
attempt ended: its calls with a result journaled by the later attempt ran again (``re-ran``),
the others were committed before the crash and reused (``replayed``); a call a ``tool/call``
started before that later attempt was an unsafe call settled without running again
(``settled``, or ``outcome unknown`` for an error commit). Earlier lost turns had closed before
the crash, so their calls keep ``executed``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.timeline.values import CallMark, TimelineCall, TimelineTurn

Results = dict[str, list[tuple[int, str, bool]]]


def merge_turns(
    snapshot: Sequence[TimelineTurn],
    journal: Sequence[TimelineTurn],
    results: Results,
    starts: Mapping[str, tuple[int, ...]],
) -> tuple[TimelineTurn, ...]:
    """The task's turns: the snapshot's, each replaced by its journal turn when found.

    ``results`` and ``starts`` are the journal's commits and ``tool/call`` starts by call id.
    """
    if not snapshot:
        return tuple(journal)
    merged: list[TimelineTurn] = []
    lost: list[int] = []
    next_journal = 0
    for turn in snapshot:
        found = _find(turn, journal, next_journal)
        if found is None:
            lost.append(len(merged))
            merged.append(turn)
            continue
        merged.extend(journal[next_journal : found + 1])
        next_journal = found + 1
    merged.extend(journal[next_journal:])
    for index in lost:
        merged[index] = _recover(merged, index, results, starts)
    return tuple(replace(turn, index=number) for number, turn in enumerate(merged, start=1))


def _find(turn: TimelineTurn, journal: Sequence[TimelineTurn], start: int) -> int | None:
    ids = [call.call_id for call in turn.calls]
    for index in range(start, len(journal)):
        candidate = journal[index]
        if [call.call_id for call in candidate.calls] == ids and (
            ids or candidate.text == turn.text
        ):
            return index
    return None


def _recover(
    merged: list[TimelineTurn],
    index: int,
    results: Results,
    starts: Mapping[str, tuple[int, ...]],
) -> TimelineTurn:
    later = next((t.attempt for t in merged[index + 1 :] if t.attempt is not None), None)
    if later is None or later <= 1:
        return merged[index]
    following = merged[index + 1] if index + 1 < len(merged) else None
    in_flight = following is not None and following.attempt is not None
    calls = tuple(
        _recover_call(call, later, in_flight, results, starts.get(call.call_id, ()))
        for call in merged[index].calls
    )
    return replace(merged[index], attempt=later - 1, calls=calls)


def _recover_call(
    call: TimelineCall,
    later: int,
    in_flight: bool,
    results: Results,
    started: tuple[int, ...],
) -> TimelineCall:
    rows = [row for row in results.get(call.call_id, []) if row[0] >= later]
    if rows:
        attempt, text, error = rows[-1]
        mark: CallMark = "re-ran"
        if attempt not in started and any(start < attempt for start in started):
            mark = "outcome unknown" if error else "settled"
        return replace(call, mark=mark, attempt=attempt, result=text, is_error=error)
    if in_flight and call.mark == "executed":
        return replace(call, mark="replayed", attempt=later)
    return replace(call, attempt=later - 1)
