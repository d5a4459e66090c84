"""``oma demo``: run the research team and show its progress."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rich.table import Table

from oma_actors.cli.demo_team import demo_tasks, demo_team
from oma_actors.errors import ConfigurationError
from oma_actors.events import (
    ProgressEvent,
    TaskCompleted,
    TaskFailed,
    TaskRetry,
    TaskSkipped,
    TaskStarted,
    ToolCalled,
)
from oma_actors.llm.factory import create_adapter
from oma_actors.orchestration.orchestrator import OpenMultiAgent

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from oma_actors.agents.config import Team
    from oma_actors.domain.results import TeamRunResult


def live_team(out_dir: Path) -> Team:
    """The demo team on a real provider, chosen from the API key in the environment."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        model = os.environ.get("OMA_DEMO_MODEL", "claude-sonnet-4-5")
        adapter = create_adapter(provider="anthropic", model=model)
    elif os.environ.get("OPENAI_API_KEY"):
        model = os.environ.get("OMA_DEMO_MODEL", "gpt-4o-mini")
        adapter = create_adapter(provider="openai", model=model)
    else:
        raise ConfigurationError(
            "--live needs ANTHROPIC_API_KEY or OPENAI_API_KEY in the environment"
        )
    return demo_team(out_dir, live_adapter=adapter, model=model)


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
        case _:
            pass


def show_result(console: Console, result: TeamRunResult, out_dir: Path) -> None:
    """Print the task table, the brief and where the files are."""
    table = Table(title=f"run {result.run_id} — {result.status.code}")
    for column in ("task", "agent", "status", "result"):
        table.add_column(column)
    for task in result.tasks:
        text = (task.result or "").replace("\n", " ")
        table.add_row(task.title, task.assignee or "", task.status, text[:70])
    console.print(table)
    usage = result.token_usage
    console.print(f"tokens: {usage.input_tokens} in / {usage.output_tokens} out")
    brief = out_dir / "brief.md"
    if brief.exists():
        console.rule("brief.md")
        console.print(brief.read_text(encoding="utf-8"))
    console.print(f"[dim]notes written to {out_dir}[/]")


async def run_demo(out_dir: Path, *, live: bool, console: Console) -> int:
    """Run the demo; returns the process exit code."""
    team = live_team(out_dir) if live else demo_team(out_dir)
    mode = "live provider" if live else "offline scripted model"
    console.rule(f"oma demo: research team, 3 agents, 5 tasks ({mode})")
    orchestrator = OpenMultiAgent(
        on_progress=lambda event: show_event(console, event), max_concurrency=3
    )
    result = await orchestrator.run_tasks(team, demo_tasks())
    show_result(console, result, out_dir)
    return 0 if result.success else 1
