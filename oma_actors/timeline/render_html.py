"""The timeline as one self-contained HTML page: inline CSS and JS, nothing fetched at view time.

One horizontal lane per task, turns left to right, each tool call a chip coloured by its mark.
Hovering shows a call's details (``title``); clicking a turn or a call pins them in the side
panel. ``+``/``-`` (or ctrl + wheel) zoom the lanes. Every element carries data attributes
(``data-task``, ``data-turn``, ``data-call``, ``data-mark``, ``data-attempt``) so tests and
tools can read the page's DOM. Every stored value is escaped.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oma_actors.timeline.values import Timeline, TimelineApproval, TimelineLane, TimelineTurn

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

_CSS = """
body{font:14px system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{padding:12px 16px;background:#263238;color:#fff}
header .sub{color:#b0bec5;font-size:12px}
header .fork{color:#ce93d8;font-size:12px}
#bar{padding:6px 16px;display:flex;gap:8px;align-items:center;flex-wrap:wrap}
#bar button{font-size:14px;width:32px}
.legend span{display:inline-block;padding:1px 6px;border-radius:8px;color:#fff;font-size:12px}
main{display:flex;gap:12px;padding:0 16px 16px}
#lanes{flex:1;overflow:auto}
#lanes-inner{transform-origin:0 0}
.lane{display:flex;align-items:stretch;border-bottom:1px solid #ddd;padding:6px 0}
.label{width:220px;flex:none;padding-right:8px}
.label b{display:block}.label small{color:#666;display:block}
.turns{display:flex;gap:6px;align-items:flex-start}
.turn{width:calc(175px*var(--zoom,1));flex:none;background:#fff;border:1px solid #cfd8dc;
border-radius:6px;padding:4px;cursor:pointer;font-size:12px;overflow:hidden}
.turn .t{color:#555;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.restore{width:6px;flex:none;background:#f9a825;border-radius:3px;align-self:stretch}
.call{display:block;margin-top:3px;padding:2px 4px;border-radius:4px;color:#fff;
white-space:nowrap;overflow:hidden;text-overflow:ellipsis;cursor:pointer}
.selected{outline:3px solid #1565c0}
aside{width:300px;flex:none;background:#fff;border:1px solid #cfd8dc;border-radius:6px;
padding:8px;font-size:12px;white-space:pre-wrap;word-break:break-word;align-self:flex-start}
.approvals{padding:0 16px 16px}
"""

_JS = """
(function(){
var zoom=1,inner=document.getElementById('lanes-inner'),panel=document.getElementById('detail');
function setZoom(z){zoom=Math.min(4,Math.max(0.4,z));inner.style.setProperty('--zoom',zoom);
document.getElementById('zoom').textContent=Math.round(zoom*100)+'%';}
document.getElementById('zin').onclick=function(){setZoom(zoom*1.25);};
document.getElementById('zout').onclick=function(){setZoom(zoom/1.25);};
document.getElementById('lanes').addEventListener('wheel',function(e){
if(e.ctrlKey){e.preventDefault();setZoom(zoom*(e.deltaY<0?1.1:1/1.1));}},{passive:false});
document.addEventListener('click',function(e){var el=e.target.closest('[data-detail]');
if(!el)return;e.stopPropagation();
document.querySelectorAll('.selected').forEach(function(s){s.classList.remove('selected');});
el.classList.add('selected');panel.textContent=el.getAttribute('data-detail');});
setZoom(1);})();
"""


def _fork(timeline: Timeline) -> str:
    """The fork point and the parent of a forked run (D17), or nothing."""
    fork = timeline.forked_from
    if fork is None:
        return ""
    return (
        f'<div class="fork" data-parent="{escape(fork.run_id)}" data-fork-seq="{fork.seq}">'
        f"forked from run <b>{escape(fork.run_id)}</b> at seq {fork.seq}: what came before is "
        "the parent's (replayed, never run again)</div>"
    )


def render_timeline_html(timeline: Timeline) -> str:
    """The whole page as a string; write it to a ``.html`` file."""
    title = f"oma run {timeline.run_id}"
    legend = "".join(
        f'<span style="background:{color}">{escape(mark)}</span> '
        for mark, color in MARK_COLOR.items()
    )
    lanes = "".join(_lane(lane) for lane in timeline.lanes)
    approvals = "".join(_approval(row) for row in timeline.approvals)
    source = "journal + snapshot" if timeline.from_journal else "snapshot only (no journal)"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f'<body data-run="{escape(timeline.run_id)}" data-status="{escape(timeline.status)}">'
        f"<header><b>{escape(title)}</b> · attempt {timeline.attempt} · revision "
        f"{timeline.revision} · {escape(timeline.status)}"
        f"{_fork(timeline)}"
        f'<div class="sub">{len(timeline.lanes)} tasks, {len(timeline.calls)} tool calls, '
        f"from {source}. Click a turn or a call for details; ctrl + wheel zooms.</div></header>"
        f'<div id="bar"><button id="zout" title="zoom out">−</button><span id="zoom">'
        f'</span><button id="zin" title="zoom in">+</button><span class="legend">{legend}'
        f"</span></div>"
        f'<main><div id="lanes"><div id="lanes-inner">{lanes}</div></div>'
        f'<aside id="detail">Click a turn or a tool call.</aside></main>'
        + (
            f'<section class="approvals"><h3>Approvals</h3><ul>{approvals}</ul></section>'
            if approvals
            else ""
        )
        + f"<script>{_JS}</script></body></html>"
    )


def _lane(lane: TimelineLane) -> str:
    attempts = ", ".join(map(str, lane.attempts)) or "?"
    label = (
        f'<div class="label"><b>{escape(lane.title)}</b><small>{escape(lane.assignee or "-")}'
        f" · {escape(lane.status)}</small><small>{lane.input_tokens} in / "
        f"{lane.output_tokens} out tokens · attempts {escape(attempts)}</small></div>"
    )
    cells: list[str] = []
    current: int | None = None
    for turn in lane.turns:
        if turn.attempt is not None and turn.attempt != current:
            if current is not None:
                cells.append(f'<div class="restore" title="attempt {turn.attempt} (restored)" '
                             f'data-restore="{turn.attempt}"></div>')  # fmt: skip
            current = turn.attempt
        cells.append(_turn(lane, turn))
    return (
        f'<div class="lane" data-task="{escape(lane.task_id)}" data-status="'
        f'{escape(lane.status)}" data-attempts="{escape(attempts)}">{label}'
        f'<div class="turns">{"".join(cells)}</div></div>'
    )


def _turn(lane: TimelineLane, turn: TimelineTurn) -> str:
    usage = "" if turn.input_tokens is None else f"{turn.input_tokens}/{turn.output_tokens} tok"
    detail = (
        f"task: {lane.title}\nturn {turn.index}, attempt {turn.attempt or '?'}\n"
        f"tokens: {usage or '?'}\n\n{turn.text}"
    )
    calls = "".join(
        f'<span class="call" style="background:{MARK_COLOR[call.mark]}" '
        f'data-call="{escape(call.call_id)}" data-tool="{escape(call.tool_name)}" '
        f'data-mark="{escape(call.mark)}" data-attempt="{call.attempt or ""}" '
        f'title="{escape(call.mark)}: {escape(call.tool_name)}" data-detail="'
        + escape(
            f"{call.tool_name} ({call.call_id})\nmark: {call.mark}\nattempt: "
            f"{call.attempt or '?'}\n"
            + (f"approval: {call.approval_id}\n" if call.approval_id else "")
            + f"\nresult{' (error)' if call.is_error else ''}: {call.result or '-'}"
        )
        + f'">{escape(call.tool_name)} · {escape(call.mark)}</span>'
        for call in turn.calls
    )
    return (
        f'<div class="turn" data-turn="{turn.index}" data-attempt="{turn.attempt or ""}" '
        f'title="turn {turn.index} {escape(usage)}" data-detail="{escape(detail)}">'
        f'<div class="t">turn {turn.index} {escape(usage)}</div>'
        f'<div class="t">{escape(turn.text)}</div>{calls}</div>'
    )


def _approval(row: TimelineApproval) -> str:
    state = (
        "pending"
        if row.decision is None
        else f"{row.decision} by {row.reviewer} at {row.decided_at}"
    )
    return (
        f'<li data-approval="{escape(row.request_id)}" data-decision="'
        f'{escape(row.decision or "pending")}"><b>{escape(row.request_id)}</b> '
        f"({escape(row.scope)}): {escape(state)}"
        + (f" — {escape(row.reason)}" if row.reason else "")
        + "</li>"
    )
