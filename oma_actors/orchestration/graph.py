"""Resolving and validating a task graph before anything runs (spec TQ-09, CD-04, PL-03)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.errors import TaskGraphError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.domain.tasks import Task


def resolve_dependencies(tasks: Sequence[Task]) -> dict[str, tuple[str, ...]]:
    """Map each task id to its dependency ids, accepting ids or titles in ``depends_on``.

    Titles match case-insensitively after trimming. Raises ``TaskGraphError`` naming the tasks on
    duplicate ids, unknown or ambiguous references, self-dependencies and cycles.
    """
    ids: dict[str, Task] = {}
    for task in tasks:
        if task.id in ids:
            raise TaskGraphError(f"duplicate task id {task.id!r}", [task.id])
        ids[task.id] = task
    by_title: dict[str, list[str]] = {}
    for task in tasks:
        by_title.setdefault(task.title.strip().lower(), []).append(task.id)

    resolved: dict[str, tuple[str, ...]] = {}
    for task in tasks:
        deps: list[str] = []
        for ref in task.depends_on:
            if ref in ids:
                target = ref
            else:
                matches = by_title.get(ref.strip().lower(), [])
                if not matches:
                    raise TaskGraphError(
                        f"task {task.title!r} depends on unknown task {ref!r}", [task.id]
                    )
                if len(matches) > 1:
                    raise TaskGraphError(
                        f"task {task.title!r} depends on {ref!r}, which matches several tasks",
                        [task.id, *matches],
                    )
                target = matches[0]
            if target == task.id:
                raise TaskGraphError(f"task {task.title!r} depends on itself", [task.id])
            if target not in deps:
                deps.append(target)
        resolved[task.id] = tuple(deps)
    check_acyclic(resolved, {task.id: task.title for task in tasks})
    return resolved


def check_acyclic(graph: Mapping[str, Sequence[str]], titles: Mapping[str, str]) -> None:
    """Raise ``TaskGraphError`` naming the tasks of the first cycle found in ``graph``."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in graph:
        if state.get(root):
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                state[node] = 1
                path.append(node)
            deps = graph.get(node, ())
            if index < len(deps):
                stack.append((node, index + 1))
                dep = deps[index]
                if state.get(dep) == 1:
                    cycle = [*path[path.index(dep) :], dep]
                    names = " -> ".join(repr(titles.get(item, item)) for item in cycle)
                    raise TaskGraphError(f"dependency cycle: {names}", cycle[:-1])
                if not state.get(dep):
                    stack.append((dep, 0))
            else:
                state[node] = 2
                path.pop()
