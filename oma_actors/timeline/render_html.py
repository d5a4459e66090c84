"""The timeline as one self-contained HTML page: inline CSS and JS, nothing fetched at view time.

One horizontal lane per task, turns left to right, each tool call a chip coloured by its mark.
Hovering shows a call's details (``title``); clicking a turn or a call pins them in the side
panel. ``+``/``-`` (or ctrl + wheel) zoom the lanes. Every element carries data attributes
(``data-task``, ``data-turn``, ``data-call``, ``data-mark``, ``data-attempt``) so tests and
tools can read the page's DOM, and ``<script id="timeline-data">`` holds the run's tasks and
calls as JSON.

The page is a Jinja template (``templates/``) with autoescape on: every stored value is escaped
by the template engine wherever it lands (text, attribute, embedded JSON), not by hand at each
place, so a new field cannot be added unescaped.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import jinja2

if TYPE_CHECKING:
    from collections.abc import Iterator

    from oma_actors.timeline.values import (
        Timeline,
        TimelineApproval,
        TimelineCall,
        TimelineLane,
        TimelineTurn,
    )

MARK_COLOR = {
    "executed": "#2e7d32",
    "replayed": "#b8860b",
    "re-ran": "#00838f",
    "settled": "#1565c0",
    "outcome unknown": "#c62828",
    "rejected": "#6d4c41",
    "running": "#0277bd",
    "awaiting approval": "#8e24aa",
    "pending": "#757575",
}


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("oma_actors.timeline", "templates"),
        autoescape=True,  # every template here is HTML, CSS or JS included into HTML
        undefined=jinja2.StrictUndefined,  # a misspelt field fails the render, not blanks it
        keep_trailing_newline=False,
    )
    env.globals.update(
        turns_of=_turns_of,
        usage_of=_usage,
        turn_detail=_turn_detail,
        call_detail=_call_detail,
        edited=_edited,
    )
    return env.get_template("timeline.html.j2")


def render_timeline_html(timeline: Timeline) -> str:
    """The whole page as a string; write it to a ``.html`` file."""
    return _template().render(
        t=timeline,
        title=f"oma run {timeline.run_id}",
        source="journal + snapshot" if timeline.from_journal else "snapshot only (no journal)",
        colors=MARK_COLOR,
        data=_data(timeline),
    )


def _data(timeline: Timeline) -> dict[str, Any]:
    """What the page's JSON data island holds: the run, its tasks and their calls."""
    return {
        "run_id": timeline.run_id,
        "status": timeline.status,
        "reason": timeline.reason,
        "attempt": timeline.attempt,
        "tasks": [
            {
                "task_id": lane.task_id,
                "title": lane.title,
                "status": lane.status,
                "reason": lane.reason,
                "tries": lane.tries,
                "calls": [
                    {"call_id": call.call_id, "tool": call.tool_name, "mark": call.mark}
                    for turn in lane.turns
                    for call in turn.calls
                ],
            }
            for lane in timeline.lanes
        ],
    }


def _turns_of(lane: TimelineLane) -> Iterator[tuple[TimelineTurn, int | None, int | None]]:
    """Each turn with the attempt it was restored into when that attempt starts there, and the
    try it starts when it is a retry's first turn."""
    current: int | None = None
    task_try = 1
    for turn in lane.turns:
        restored = None
        if turn.attempt is not None and turn.attempt != current:
            restored = turn.attempt if current is not None else None
            current = turn.attempt
        retry = turn.task_try if turn.task_try != task_try else None
        task_try = turn.task_try
        yield turn, restored, retry


def _usage(turn: TimelineTurn) -> str:
    return "" if turn.input_tokens is None else f"{turn.input_tokens}/{turn.output_tokens} tok"


def _turn_detail(lane: TimelineLane, turn: TimelineTurn) -> str:
    tried = f", try {turn.task_try}" if lane.tries > 1 else ""
    ended = f"\nended: {turn.outcome}" if turn.outcome else ""
    return (
        f"task: {lane.title}\nturn {turn.index}{tried}, attempt {turn.attempt or '?'}\n"
        f"tokens: {_usage(turn) or '?'}{ended}\n\n{turn.text}"
    )


def _edited(row: TimelineApproval) -> str:
    """A decision's edited input as one line of JSON ("" without one)."""
    if row.edited_input is None:
        return ""
    return json.dumps(row.edited_input, ensure_ascii=False, sort_keys=True, default=str)


def _call_detail(call: TimelineCall) -> str:
    approval = f"approval: {call.approval_id}\n" if call.approval_id else ""
    error = " (error)" if call.is_error else ""
    return (
        f"{call.tool_name} ({call.call_id})\nmark: {call.mark}\nattempt: {call.attempt or '?'}\n"
        f"{approval}\nresult{error}: {call.result or '-'}"
    )
