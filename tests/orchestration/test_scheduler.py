"""OMA's default scheduler at dispatch, ``dependency-first`` (``scheduler.ts``, v1.16.1).

``task-execution.ts`` takes the ready tasks in ``orderReadyTasks`` order (most transitive
dependents first, ties in their order) and gives an unassigned one to ``scheduleTask``: the next
agent of the roster from a cursor at 0, round robin. The run dispatched ready tasks in queue
order and gave an unassigned one to the least busy agent.
"""

from __future__ import annotations

from oma_actors import AgentConfig, OpenMultiAgent, Task, Team, TokenUsage
from oma_actors.domain.tasks import TaskState
from oma_actors.events import ProgressEvent, TaskStarted
from oma_actors.llm import LLMResponse, TextBlock
from oma_actors.orchestration.queue import TaskQueue
from oma_actors.orchestration.scheduler import DependencyFirst
from oma_actors.testing import ScriptedAdapter


def state(task_id: str, *depends_on: str, assignee: str | None = None) -> TaskState:
    status = "blocked" if depends_on else "pending"
    return TaskState(
        id=task_id, title=task_id, description=task_id, status=status, depends_on=depends_on,
        assignee=assignee,
    )  # fmt: skip


def test_ready_tasks_go_most_dependents_first_and_ties_keep_their_order() -> None:
    tasks = [state("b"), state("a"), state("c", "a"), state("d", "c"), state("e"), state("f", "e")]
    scheduler = DependencyFirst(["w"])
    ready = [tasks[0], tasks[1], tasks[4]]
    assert [t.id for t in scheduler.rank(ready, tasks)] == ["a", "e", "b"]


def test_unassigned_tasks_take_the_roster_round_robin_from_the_first() -> None:
    scheduler = DependencyFirst(["alice", "bob", "carol"])
    assert [scheduler.next_agent() for _ in range(5)] == ["alice", "bob", "carol", "alice", "bob"]


def test_up_front_assignment_takes_pending_unassigned_tasks_and_moves_the_cursor() -> None:
    queue = TaskQueue([state("a"), state("b"), state("c", "b"), state("d", assignee="bob")])
    scheduler = DependencyFirst(["alice", "bob"])
    scheduler.assign_up_front(queue)
    assert {t.id: t.assignee for t in queue.tasks} == {
        "a": "bob", "b": "alice", "c": None, "d": "bob",
    }  # fmt: skip
    assert scheduler.next_agent() == "alice"  # two assigned: the cursor went round once


async def test_dispatch_takes_the_critical_task_first_and_assigns_round_robin() -> None:
    started: list[tuple[str, str]] = []

    def seen(event: ProgressEvent) -> None:
        if isinstance(event, TaskStarted):
            started.append((event.task_id, event.agent))

    model = ScriptedAdapter(lambda m, o: LLMResponse([TextBlock("ok")], usage=TokenUsage(1, 1)))
    team = Team("t", [AgentConfig("alice", adapter=model), AgentConfig("bob", adapter=model)])
    tasks = [
        Task("B", "b", id="b"),
        Task("A", "a", id="a"),
        Task("C", "c", id="c", depends_on=["a"]),
        Task("D", "d", id="d", depends_on=["c"]),
    ]
    result = await OpenMultiAgent(max_concurrency=1, on_progress=seen).run_tasks(team, tasks)
    assert result.success
    # A blocks C and D: first. Then C (blocks D) before B; then B before D (queue order).
    assert started == [("a", "alice"), ("c", "bob"), ("b", "alice"), ("d", "bob")]


def test_a_new_plan_revision_is_ranked_by_its_own_graph() -> None:
    # The counts are kept between dispatches; a graph that changed (a plan revision) is
    # counted again.
    scheduler = DependencyFirst(["w"])
    first = [state("a"), state("b"), state("c", "a")]
    assert [t.id for t in scheduler.rank(first[:2], first)] == ["a", "b"]
    revised = [state("a"), state("b"), state("c", "b")]
    assert [t.id for t in scheduler.rank(revised[:2], revised)] == ["b", "a"]
