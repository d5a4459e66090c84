"""The timeline in the terminal: one lane per task, rich text that wraps at any width (>= 60).

rich is imported when a timeline is drawn, never by ``import oma_actors`` (P6). Every line is
a ``rich.text.Text`` built from stored values (never parsed as markup), and every stored value
passes ``terminal_safe`` first (rich passes ESC sequences and bidi overrides through), so a
model's text, a tool's output or a title cannot style, move or forge the output; rich wraps long
lines at the console's width.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from oma_actors.readable import shorten
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.text import Text

    from oma_actors.timeline.values import Timeline, TimelineApproval, TimelineLane, TimelineTurn

# Mark -> (symbol, style). The symbols keep the marks readable without colour.
MARK_STYLE: dict[str, tuple[str, str]] = {
    "executed": ("✓", "green"),
    "replayed": ("↺", "yellow"),
    "re-ran": ("⟳", "cyan"),
    "settled": ("≡", "blue"),
    "outcome unknown": ("?", "bold red"),
    "rejected": ("✗", "red"),
    "running": ("▸", "cyan"),
    "awaiting approval": ("⏸", "magenta"),
    "pending": ("…", "dim"),
}
STATUS_STYLE = {
    "completed": "green",
    "failed": "red",
    "cancelled": "red",
    "interrupted": "yellow",
    "in_progress": "yellow",
    "blocked": "dim",
}
TEXT_CHARS = 60
# How a turn ended, shown when it did not end as a turn normally does (an answer, tool calls).
OUTCOME_NOTE = {
    "error": "model call failed",
    "aborted": "aborted",
    "budget_exceeded": "token budget exceeded",
    "loop_detected": "loop detected",
}


def render_timeline_text(timeline: Timeline) -> RenderableType:
    """The timeline as a rich renderable: print it with ``console.print``."""
    from rich.console import Group
    from rich.rule import Rule

    parts: list[RenderableType] = [_header(timeline)]
    for lane in timeline.lanes:
        parts.append(Rule(style="dim"))
        parts.extend(_lane(lane))
    if timeline.approvals:
        parts.append(Rule("approvals", style="dim"))
        parts.extend(_approval(row) for row in timeline.approvals)
    parts.append(Rule(style="dim"))
    parts.append(_Legend())
    return Group(*parts)


def _header(timeline: Timeline) -> Text:
    from rich.text import Text

    text = Text()
    text.append(f"run {terminal_safe(timeline.run_id)}", style="bold")
    text.append(f"  attempt {timeline.attempt}  revision {timeline.revision}  ")
    text.append(
        terminal_safe(timeline.status),
        style=STATUS_STYLE.get(timeline.status.replace(" ", "_"), ""),
    )
    if timeline.reason:
        text.append(f": {_short(timeline.reason)}")
    fork = timeline.forked_from
    if fork is not None:
        text.append(
            f"\nforked from run {terminal_safe(fork.run_id)} at seq {fork.seq}: "
            "what came before is the parent's (replayed, never run again)",
            style="magenta",
        )
    source = "journal + snapshot" if timeline.from_journal else "snapshot only (no journal)"
    text.append(f"\n{len(timeline.lanes)} tasks, {len(timeline.calls)} tool calls, from {source}",
                style="dim")  # fmt: skip
    return text


def _lane(lane: TimelineLane) -> list[RenderableType]:
    from rich.text import Text

    head = Text()
    head.append(f"■ {terminal_safe(lane.title)}", style="bold")
    head.append(f"  {terminal_safe(lane.assignee or '-')}  ")
    head.append(terminal_safe(lane.status), style=STATUS_STYLE.get(lane.status, ""))
    if lane.reason:
        head.append(f" ({_short(lane.reason)})", style=STATUS_STYLE.get(lane.status, ""))
    tokens = f"{lane.input_tokens} in / {lane.output_tokens} out tokens"
    attempts = ", ".join(map(str, lane.attempts)) or "?"
    tries = f"  tries {lane.tries}" if lane.tries > 1 else ""
    head.append(f"\n  {len(lane.turns)} turns  {tokens}  attempts {attempts}{tries}", style="dim")
    lines: list[RenderableType] = [head]
    current: int | None = None
    task_try = 1
    for turn in lane.turns:
        if turn.task_try != task_try:
            task_try = turn.task_try
            lines.append(Text(f"  ── try {task_try} (retry of the failed try) ──", style="cyan"))
        if turn.attempt is not None and turn.attempt != current:
            if current is not None:
                lines.append(Text(f"  ── attempt {turn.attempt} (restored) ──", style="yellow"))
            current = turn.attempt
        lines.extend(_turn(turn))
    return lines


def _turn(turn: TimelineTurn) -> list[Text]:
    from rich.text import Text

    line = Text(f"  turn {turn.index}", style="bold")
    if turn.input_tokens is not None:
        line.append(f" ({turn.input_tokens}/{turn.output_tokens} tok)", style="dim")
    if turn.text:
        line.append(f"  {_short(turn.text)}")
    note = OUTCOME_NOTE.get(turn.outcome or "")
    if note is not None:
        line.append(f"  ✗ {note}", style="red")
    out = [line]
    for call in turn.calls:
        symbol, style = MARK_STYLE[call.mark]
        row = Text("    ")
        row.append(f"{symbol} {call.mark}", style=style)
        row.append(f"  {terminal_safe(call.tool_name)} ", style="bold")
        row.append(terminal_safe(call.call_id), style="dim")
        if call.attempt is not None and call.mark in ("replayed", "re-ran"):
            row.append(f" (attempt {call.attempt})", style="dim")
        if call.result:
            row.append(f"\n      → {_short(call.result)}", style="red" if call.is_error else "")
        if call.approval_id:
            row.append(f"\n      approval {terminal_safe(call.approval_id)}", style="magenta")
        out.append(row)
    return out


def _approval(row: TimelineApproval) -> Text:
    from rich.text import Text

    text = Text(f"{terminal_safe(row.request_id)} ({terminal_safe(row.scope)})", style="bold")
    if row.decision is None:
        text.append("  pending", style="magenta")
    else:
        text.append(
            f"  {terminal_safe(row.decision)}",
            style="green" if row.decision == "approve" else "red",
        )
        text.append(
            f" by {terminal_safe(str(row.reviewer))} at {terminal_safe(str(row.decided_at))}"
        )
    where = [
        f"{name} {terminal_safe(value)}"
        for name, value in (
            ("task", row.task_id),
            ("call", row.tool_call_id),
            ("requested at", row.requested_at),
        )
        if value
    ]
    if where:
        text.append(f"\n  {', '.join(where)}", style="dim")
    if row.inherited_from is not None:
        text.append(
            f"\n  decided in parent run {terminal_safe(row.inherited_from)}, re-bound by the fork",
            style="magenta",
        )
    if row.edited_input is not None:
        edited = json.dumps(row.edited_input, ensure_ascii=False, sort_keys=True, default=str)
        text.append(f"\n  edited input: {_short(edited)}", style="yellow")
    if row.reason:
        text.append(f"\n  {_short(row.reason)}", style="dim")
    return text


class _Legend:
    """The marks' legend, wrapped between entries only (never inside one) at any width."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        from rich.cells import cell_len
        from rich.text import Text

        head = "marks: "
        line, entries = Text(head, style="dim"), 0
        for mark, (symbol, style) in MARK_STYLE.items():
            entry = f"{symbol} {mark}"
            gap = "  " if entries else ""
            if entries and line.cell_len + len(gap) + cell_len(entry) > options.max_width:
                yield line
                line, entries, gap = Text(" " * len(head)), 0, ""
            line.append(gap)
            line.append(entry, style=style)
            entries += 1
        yield line


def _short(text: str) -> str:
    return shorten(terminal_safe(text), TEXT_CHARS)
