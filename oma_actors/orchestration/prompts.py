"""The prompts the orchestrator writes: task prompts, decomposition, repair and synthesis."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.agents.config import AgentConfig
    from oma_actors.domain.tasks import TaskState


def task_prompt(task: TaskState, dependencies: Sequence[TaskState]) -> str:
    """The prompt for ``task``: its description, then its completed prerequisites' outputs.

    OMA's text to the letter (``buildTaskPrompt``, dependency payload ``output``): one entry a
    prerequisite with a non-empty result, heading and result on consecutive lines, the entries
    one after another, and no section at all when none has a result.
    """
    parts = [f"# Task: {task.title}", "", task.description]
    outputs = [
        f"### {dep.title} (by {dep.assignee or 'unknown'})\n{dep.result}"
        for dep in dependencies
        if dep.status == "completed" and dep.result
    ]
    if outputs:
        parts += ["", "## Context from prerequisite tasks", "", *outputs]
    return "\n".join(parts)


def decomposition_prompt(goal: str, agents: Sequence[AgentConfig]) -> str:
    """Ask the coordinator for a JSON task list over the roster (spec CD-02)."""
    roster = "\n".join(
        f"- {agent.name}: {agent.system_prompt or 'general-purpose agent'}"
        + (f" (tools: {', '.join(tool.name for tool in agent.tools)})" if agent.tools else "")
        for agent in agents
    )
    return (
        "You coordinate a team of agents. Break the goal below into tasks for the team.\n\n"
        f"## Goal\n{goal}\n\n## Team\n{roster}\n\n"
        "Reply with ONLY a JSON array (no prose, no code fence). Each element is an object with:\n"
        '- "title": short unique title (string, required)\n'
        '- "description": what to do (string, required)\n'
        '- "assignee": the agent name from the team list (string, optional)\n'
        '- "dependsOn": titles of tasks that must finish first (array of strings, optional)\n'
        '- "maxRetries": extra attempts after a failure (integer, optional)\n'
    )


def repair_prompt(error: str) -> str:
    """OMA's structured-output feedback: ask once more, quoting why the reply was refused.

    ``agent.ts`` ``validateStructuredOutput`` sends this text to the letter, with the error of
    ``extractJSON`` or ``validateOutput`` (spec CD-02).
    """
    return (
        "Your previous response did not produce valid JSON matching the required schema.\n"
        "\n"
        f"Error: {error}\n"
        "\n"
        "Please try again. Respond with ONLY valid JSON, no other text."
    )


def synthesis_prompt(goal: str, tasks: Sequence[TaskState], memory_summary: str) -> str:
    """Ask the coordinator for the final answer from the team's results (spec CD-07)."""
    lines = [f"## Original Goal\n{goal}", "", "## Completed Tasks"]
    for task in tasks:
        if task.status == "completed":
            lines += [
                f"### {task.title} (completed by {task.assignee or 'unknown'})",
                task.result or "",
            ]
    failed = [task for task in tasks if task.status == "failed"]
    if failed:
        lines += ["", "## Failed Tasks"]
        lines += [f"- {task.title}: {task.result or ''}" for task in failed]
    skipped = [task for task in tasks if task.status == "skipped"]
    if skipped:
        lines += ["", "## Skipped Tasks"]
        lines += [f"- {task.title}: {task.result or ''}" for task in skipped]
    if memory_summary:
        lines += ["", "## Shared Memory", memory_summary]
    lines += ["", "Write the final answer to the original goal from these results."]
    return "\n".join(lines)
