"""Rendering events, results and snapshots for the terminal.

Every stored value (titles, results, ids, errors) goes through ``_v``: ``terminal_safe`` (no
escape sequence, control or bidi override reaches the terminal) and rich's markup escape (a
``[red]`` in a model's text is printed, not obeyed), because these lines are rich markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from oma_actors.events import (
    CheckpointSaveFailed,
    TaskCompleted,
    TaskFailed,
    TaskRetry,
    TaskSkipped,
    TaskStarted,
    ToolCalled,
    ToolOutcomeUnknown,
)
from oma_actors.timeline.terminal import terminal_safe

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from oma_actors import TeamRunResult
    from oma_actors.checkpoint import CheckpointSnapshot
    from oma_actors.events import ProgressEvent


def _cut(width: int) -> dict[str, Any]:
    """A column of at most ``width`` cells, one line, cut by rich with an ellipsis."""
    return {"max_width": width, "no_wrap": True, "overflow": "ellipsis"}


def show_event(console: Console, event: ProgressEvent) -> None:
    """Print one progress line."""
    match event:
        case TaskStarted(title=title, agent=agent):
            console.print(f"[cyan]▶ start[/]    {_v(title)} [dim]({_v(agent)})[/]")
        case ToolCalled(agent=agent, tool_name=tool, is_error=is_error, replayed=replayed):
            mark = "[yellow]replayed[/]" if replayed else ("[red]error[/]" if is_error else "ok")
            console.print(f"  [dim]tool[/]     {_v(agent)} → {_v(tool)} {mark}")
        case TaskCompleted(title=title, result=result):
            usage = result.token_usage
            console.print(
                f"[green]✔ done[/]     {_v(title)} [dim]({result.turns} turns, "
                f"{usage.input_tokens}/{usage.output_tokens} tokens)[/]"
            )
        case TaskFailed(title=title, error=error):
            console.print(f"[red]✘ failed[/]   {_v(title)}: {_v(error)}")
        case TaskSkipped(title=title, reason=reason):
            console.print(f"[yellow]↷ skipped[/]  {_v(title)}: {_v(reason)}")
        case TaskRetry(task_id=task_id, attempt=attempt, next_delay_ms=delay):
            console.print(
                f"[yellow]↻ retry[/]    {_v(task_id)} after attempt {attempt} in {delay} ms"
            )
        case CheckpointSaveFailed(error=error):
            console.print(f"[red]! checkpoint save failed[/]: {_v(error)}")
        case ToolOutcomeUnknown(tool_call_id=call_id):
            console.print(f"[red]? outcome unknown[/] {_v(call_id)}: not run again")
        case _:
            pass


def show_result(console: Console, result: TeamRunResult, out_dir: Path | None = None) -> None:
    """Print the task table and, for the demo, the brief."""
    table = Table(title=f"run {_v(result.run_id)} (attempt {result.attempt}): {result.status.code}")
    for column in ("task", "agent", "status"):
        table.add_column(column)
    table.add_column("result", **_cut(60))
    for task in result.tasks:
        text = (task.result or "").replace("\n", " ")
        table.add_row(
            *(
                Text(terminal_safe(cell))
                for cell in (task.title, task.assignee or "", task.status, text)
            )
        )
    console.print(table)
    usage = result.token_usage
    console.print(f"tokens: {usage.input_tokens} in / {usage.output_tokens} out")
    if out_dir is not None and (out_dir / "brief.md").exists():
        console.rule("brief.md")
        console.print((out_dir / "brief.md").read_text(encoding="utf-8"))


def show_snapshot(console: Console, snapshot: CheckpointSnapshot) -> None:
    """Print a snapshot readably: identity, tasks, in-flight runners and their pending calls."""
    console.print(
        f"run [bold]{_v(snapshot.run_id)}[/] · mode {_v(snapshot.mode)} · "
        f"schema v{snapshot.version} · attempt {snapshot.attempt} · "
        f"revision {snapshot.revision} · saved {_v(snapshot.created_at)}"
    )
    if snapshot.goal:
        console.print(f"goal: {_v(snapshot.goal)}")
    tasks = Table(title="tasks")
    tasks.add_column("id", **_cut(9))  # enough of a uuid to tell tasks apart
    for column in ("title", "status", "assignee"):
        tasks.add_column(column)
    tasks.add_column("result", **_cut(40))
    for task in snapshot.tasks:
        result = (task.result or "").replace("\n", " ")
        cells = (task.id, task.title, task.status, task.assignee or "", result)
        tasks.add_row(*(Text(terminal_safe(cell)) for cell in cells))
    console.print(tasks)
    titles = {task.id: task.title for task in snapshot.tasks}
    for entry in snapshot.in_flight:
        state = entry.state
        usage = state.token_usage
        console.print(
            f"in flight: [bold]{_v(titles.get(entry.task_id, entry.task_id))}[/] "
            f"({_v(entry.assignee)}) "
            f"phase {_v(state.phase)}, {state.turns} turns, "
            f"{usage.input_tokens}/{usage.output_tokens} tokens"
        )
        for item in state.pending:
            status = (
                "committed"
                if item.commit
                else ("dispatched" if item.dispatched else "not committed")
            )
            console.print(f"  call {_v(item.call.id)} {_v(item.call.name)}: {status}")
    if snapshot.shared_memory is not None:
        count = len(snapshot.shared_memory.get("entries", []))
        console.print(f"shared memory: {count} entries, turn {snapshot.turn_count}")


def _v(value: object) -> str:
    """A stored value made safe inside a rich markup line."""
    return escape(terminal_safe(str(value)))
