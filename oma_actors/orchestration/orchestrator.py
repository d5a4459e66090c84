"""``OpenMultiAgent``: the facade. Every flow it offers lives in its own module."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from oma_actors.agents.runner import resolve_agent, run_task
from oma_actors.errors import ConfigurationError
from oma_actors.events import AgentCompleted, ProgressEvent
from oma_actors.orchestration.flows import plan_tasks, run_goal, run_task_list
from oma_actors.orchestration.options import (
    CheckpointArg,
    check_max_concurrency,
    resolve_checkpoint,
)

if TYPE_CHECKING:
    from oma_actors.agents.config import AgentConfig, Team
    from oma_actors.domain.results import AgentRunResult, TeamRunResult
    from oma_actors.domain.tasks import PlanArtifact, Task
    from oma_actors.orchestration.gates import Gate

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[ProgressEvent], None]


class OpenMultiAgent:
    """Runs agents, task lists, plans and goals for teams of agents.

    Args:
        checkpoint: the default checkpoint setting of every run (per-call replaces it).
        on_progress: receives every ``ProgressEvent``; an exception it raises is logged and
            never breaks the run.
        max_concurrency: tasks in flight at once per run.
        on_task_dispatch, on_plan_ready, on_tool_call: approval gates.
    """

    def __init__(
        self,
        *,
        checkpoint: CheckpointArg = None,
        on_progress: ProgressCallback | None = None,
        max_concurrency: int = 4,
        on_task_dispatch: Gate | None = None,
        on_plan_ready: Gate | None = None,
        on_tool_call: Gate | None = None,
    ) -> None:
        if any(gate is not None for gate in (on_task_dispatch, on_plan_ready, on_tool_call)):
            raise ConfigurationError(
                "approval gates (on_task_dispatch, on_plan_ready, on_tool_call) are not "
                "available in this build yet"
            )
        resolve_checkpoint(None, checkpoint)
        self._checkpoint = checkpoint
        self._on_progress = on_progress
        self._max_concurrency = check_max_concurrency(max_concurrency)

    def _emit(self, event: ProgressEvent) -> None:
        if self._on_progress is None:
            return
        try:
            self._on_progress(event)
        except Exception:  # a broken observer must never break the run or its save order
            logger.exception("on_progress callback raised for %s", type(event).__name__)

    async def run_agent(self, agent: AgentConfig, prompt: str) -> AgentRunResult:
        """Run one agent on one prompt (never checkpointed)."""
        outcome = await run_task(resolve_agent(agent), None, prompt, run_id=None, emit=self._emit)
        self._emit(
            AgentCompleted(run_id=None, agent=agent.name, task_id=None, result=outcome.result)
        )
        return outcome.result

    async def run_tasks(
        self, team: Team, tasks: Sequence[Task], *, checkpoint: CheckpointArg = None
    ) -> TeamRunResult:
        """Run explicit tasks; the graph is validated before any agent works.

        Raises:
            TaskGraphError: cycles, unknown dependencies or assignees, duplicate ids.
        """
        resolve_checkpoint(checkpoint, self._checkpoint)
        return await run_task_list(
            team, tasks, max_concurrency=self._max_concurrency, emit=self._emit
        )

    async def run_from_plan(
        self, team: Team, plan: PlanArtifact, *, checkpoint: CheckpointArg = None
    ) -> TeamRunResult:
        """Run a reviewed plan artifact with its ids and dependencies exactly (spec PL-03)."""
        resolve_checkpoint(checkpoint, self._checkpoint)
        return await run_task_list(
            team, plan_tasks(plan), max_concurrency=self._max_concurrency, emit=self._emit
        )

    async def run_team(
        self,
        team: Team,
        goal: str,
        *,
        checkpoint: CheckpointArg = None,
        coordinator: AgentConfig | None = None,
        plan_only: bool = False,
    ) -> TeamRunResult:
        """Let a coordinator plan ``goal`` for the team, run the plan and synthesize the answer."""
        resolve_checkpoint(checkpoint, self._checkpoint)
        return await run_goal(
            team,
            goal,
            coordinator=coordinator,
            plan_only=plan_only,
            max_concurrency=self._max_concurrency,
            emit=self._emit,
        )

    async def restore(
        self,
        team: Team,
        tasks_or_plan: Sequence[Task] | PlanArtifact | None = None,
        *,
        checkpoint: CheckpointArg = None,
        coordinator: AgentConfig | None = None,
        journal: object | None = None,
    ) -> TeamRunResult:
        """Resume a checkpointed run (requires the checkpoint package, not in this build)."""
        raise ConfigurationError("restore is not available in this build yet")
