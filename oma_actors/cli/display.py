"""Rendering events, results and snapshots for the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from oma_actors import (
    CheckpointSaveFailed,
    TaskCompleted,
    TaskFailed,
    TaskRetry,
    TaskSkipped,
    TaskStarted,
    ToolCalled,
    ToolOutcomeUnknown,
)

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from oma_actors import CheckpointSnapshot, ProgressEvent, TeamRunResult


def show_event(console: Console, event: ProgressEvent) -> None:
    """Print one progress line."""
    match event:
        case TaskStarted(title=title, agent=agent):
            console.print(f"[cyan]▶ start[/]    {title} [dim]({agent})[/]")
        case ToolCalled(agent=agent, tool_name=tool, is_error=is_error, replayed=replayed):
            mark = "[yellow]replayed[/]" if replayed else ("[red]error[/]" if is_error else "ok")
            console.print(f"  [dim]tool[/]     {agent} → {tool} {mark}")
        case TaskCompleted(title=title, result=result):
            usage = result.token_usage
            console.print(
                f"[green]✔ done[/]     {title} [dim]({result.turns} turns, "
                f"{usage.input_tokens}/{usage.output_tokens} tokens)[/]"
            )
        case TaskFailed(title=title, error=error):
            console.print(f"[red]✘ failed[/]   {title}: {error}")
        case TaskSkipped(title=title, reason=reason):
            console.print(f"[yellow]↷ skipped[/]  {title}: {reason}")
        case TaskRetry(task_id=task_id, attempt=attempt, next_delay_ms=delay):
            console.print(f"[yellow]↻ retry[/]    {task_id} after attempt {attempt} in {delay} ms")
        case CheckpointSaveFailed(error=error):
            console.print(f"[red]! checkpoint save failed[/]: {error}")
        case ToolOutcomeUnknown(tool_call_id=call_id):
            console.print(f"[red]? outcome unknown[/] {call_id}: not run again")
        case _:
            pass


def show_result(console: Console, result: TeamRunResult, out_dir: Path | None = None) -> None:
    """Print the task table and, for the demo, the brief."""
    table = Table(title=f"run {result.run_id} (attempt {result.attempt}): {result.status.code}")
    for column in ("task", "agent", "status", "result"):
        table.add_column(column)
    for task in result.tasks:
        text = (task.result or "").replace("\n", " ")
        table.add_row(task.title, task.assignee or "", task.status, text[:60])
    console.print(table)
    usage = result.token_usage
    console.print(f"tokens: {usage.input_tokens} in / {usage.output_tokens} out")
    if out_dir is not None and (out_dir / "brief.md").exists():
        console.rule("brief.md")
        console.print((out_dir / "brief.md").read_text(encoding="utf-8"))


def show_snapshot(console: Console, snapshot: CheckpointSnapshot) -> None:
    """Print a snapshot readably: identity, tasks, in-flight runners and their pending calls."""
    console.print(
        f"run [bold]{snapshot.run_id}[/] · mode {snapshot.mode} · schema v{snapshot.version} · "
        f"attempt {snapshot.attempt} · revision {snapshot.revision} · saved {snapshot.created_at}"
    )
    if snapshot.goal:
        console.print(f"goal: {snapshot.goal}")
    tasks = Table(title="tasks")
    for column in ("id", "title", "status", "assignee", "result"):
        tasks.add_column(column)
    for task in snapshot.tasks:
        result = (task.result or "").replace("\n", " ")
        tasks.add_row(task.id[:8], task.title, task.status, task.assignee or "", result[:40])
    console.print(tasks)
    titles = {task.id: task.title for task in snapshot.tasks}
    for entry in snapshot.in_flight:
        state = entry.state
        usage = state.token_usage
        console.print(
            f"in flight: [bold]{titles.get(entry.task_id, entry.task_id)}[/] ({entry.assignee}) "
            f"phase {state.phase}, {state.turns} turns, "
            f"{usage.input_tokens}/{usage.output_tokens} tokens"
        )
        for item in state.pending:
            status = (
                "committed"
                if item.commit
                else ("dispatched" if item.dispatched else "not committed")
            )
            console.print(f"  call {item.call.id} {item.call.name}: {status}")
    if snapshot.shared_memory is not None:
        count = len(snapshot.shared_memory.get("entries", []))
        console.print(f"shared memory: {count} entries, turn {snapshot.turn_count}")
