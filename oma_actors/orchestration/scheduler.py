"""OMA's default scheduler, ``dependency-first`` (``scheduler.ts``): which ready task goes first
and which agent an unassigned task goes to.

Ready tasks are taken most critical first: by how many tasks wait for them, transitively (ties
keep queue order). An unassigned task goes to the next agent of the roster, round robin, from
the first. One scheduler serves a run from its planning on: the tasks a reviewer's plan shows
assigned up front (CD-05) advance the same cursor the dispatch then continues, as OMA's one
``Scheduler`` per run does. A restore starts a new one (OMA creates one per call).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from oma_actors.domain.tasks import TaskState
    from oma_actors.orchestration.queue import TaskQueue


class DependencyFirst:
    """The scheduling of one run over ``roster`` (agent names, in team order)."""

    def __init__(self, roster: Sequence[str]) -> None:
        self._roster = list(roster)
        self._cursor = 0
        # The graph the counts below were made for, and the counts: a count depends on the
        # graph alone (OMA counts every task, whatever its status), which changes only with a
        # plan revision, while ``rank`` is asked at every dispatch.
        self._graph: tuple[tuple[str, tuple[str, ...]], ...] = ()
        self._counts: dict[str, int] = {}

    def next_agent(self) -> str:
        """The agent the next unassigned task goes to (round robin over the roster)."""
        agent = self._roster[self._cursor % len(self._roster)]
        self._cursor = (self._cursor + 1) % len(self._roster)
        return agent

    def rank(self, ready: Sequence[TaskState], tasks: Sequence[TaskState]) -> list[TaskState]:
        """``ready`` most critical first: by how many of ``tasks`` wait for each, transitively
        (a stable sort: ties keep their order)."""
        if len(ready) < 2:
            return list(ready)
        graph = tuple((task.id, task.depends_on) for task in tasks)
        if graph != self._graph:
            self._graph, self._counts = graph, {}
        counts, waiting = self._counts, None
        for task in ready:
            if task.id not in counts:
                waiting = waiting or _waiting_counts(tasks)
                counts[task.id] = waiting(task.id)
        return sorted(ready, key=lambda task: -counts[task.id])

    def assign_up_front(self, queue: TaskQueue) -> None:
        """Assign the pending, unassigned tasks now (CD-05: the plan a reviewer sees, or a
        plan-only run returns, carries its assignees), most critical first. A blocked task stays
        unassigned: OMA's ``autoAssign`` takes only pending ones; it is assigned at dispatch."""
        tasks = queue.tasks
        waiting = [task for task in tasks if task.status == "pending" and task.assignee is None]
        for task in self.rank(waiting, tasks):
            queue.assign(task.id, self.next_agent())


def _waiting_counts(tasks: Sequence[TaskState]) -> Callable[[str], int]:
    """How many of ``tasks`` wait for one, transitively (OMA's ``countBlockedDependents``)."""
    dependents: dict[str, list[str]] = {}
    for task in tasks:
        for dependency in task.depends_on:
            dependents.setdefault(dependency, []).append(task.id)

    def count(task_id: str) -> int:
        seen: set[str] = set()
        frontier = [task_id]
        while frontier:
            for dependent in dependents.get(frontier.pop(), ()):
                if dependent not in seen:
                    seen.add(dependent)
                    frontier.append(dependent)
        return len(seen)

    return count
