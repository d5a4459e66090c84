"""The timeline in the terminal: one lane per task, rich text that wraps at any width (>= 60).

rich is imported when a timeline is drawn, never by ``import oma_actors`` (P6). Every line is
a ``rich.text.Text`` built from stored values (never parsed as markup), and every stored value
passes ``terminal_safe`` first (rich passes ESC sequences and bidi overrides through), so a
model's text, a tool's output or a title cannot style, move or forge the output; rich wraps long
lines at the console's width.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.readable import shorten
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    from rich.console import RenderableType
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
STATUS_STYLE = {"completed": "green", "failed": "red", "in_progress": "yellow", "blocked": "dim"}
TEXT_CHARS = 60


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
    parts.append(_legend())
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
    tokens = f"{lane.input_tokens} in / {lane.output_tokens} out tokens"
    attempts = ", ".join(map(str, lane.attempts)) or "?"
    head.append(f"\n  {len(lane.turns)} turns  {tokens}  attempts {attempts}", style="dim")
    lines: list[RenderableType] = [head]
    current: int | None = None
    for turn in lane.turns:
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
    if row.reason:
        text.append(f"\n  {_short(row.reason)}", style="dim")
    return text


def _legend() -> Text:
    from rich.text import Text

    text = Text("marks: ", style="dim")
    for mark, (symbol, style) in MARK_STYLE.items():
        text.append(f"{symbol} {mark}  ", style=style)
    return text


def _short(text: str) -> str:
    return shorten(terminal_safe(text), TEXT_CHARS)
