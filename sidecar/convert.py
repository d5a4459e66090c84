"""Pure conversions between the wire messages and oma_actors' values.

Requests are validated here before anything runs, and every problem is an ``InvalidArgument``
naming the field by its path in the request (``team.agents[1].tools[0]``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from oma_actors import AgentConfig, PlanArtifact, PlanTask, Task, TaskGraphError, Team
from oma_actors.stores import redact_object
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.schema import schema_text_problem
from sidecar.scripted import scripted_adapter
from sidecar.status import InvalidArgument

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from oma_actors import Tool

PROVIDERS = ("anthropic", "openai", "scripted")
# Matched with fullmatch: "$" would accept a trailing newline ("ab\n").
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_AGENTS = 64
MAX_TASKS = 2000
MAX_TEXT = 1_000_000
MAX_REASON = 4096
DEFAULT_CONCURRENCY = 4

TASK_STATUS: dict[str, pb.TaskStatus] = {
    "pending": pb.TASK_STATUS_PENDING,
    "blocked": pb.TASK_STATUS_BLOCKED,
    "in_progress": pb.TASK_STATUS_IN_PROGRESS,
    "completed": pb.TASK_STATUS_COMPLETED,
    "failed": pb.TASK_STATUS_FAILED,
    "skipped": pb.TASK_STATUS_SKIPPED,
}
"""OMA's task statuses (a ``TaskState``'s, a journal's ``task/status``) as the wire's; their
names are the ``pb.TaskCounts`` fields too."""
MODE_OF = {"goal": pb.RUN_MODE_TEAM, "tasks": pb.RUN_MODE_TASKS, "plan": pb.RUN_MODE_PLAN}


# -- validation ------------------------------------------------------------------------------


def _text(value: str, field: str, *, required: bool = True, limit: int = MAX_TEXT) -> None:
    if required and not value.strip():
        raise InvalidArgument(field, "is required")
    if len(value) > limit:
        raise InvalidArgument(field, f"is longer than {limit} characters")


def check_run_id(run_id: str, field: str = "run_id") -> None:
    """``run_id`` is 1..128 characters of letters, digits, '.', '_' and '-'."""
    if not RUN_ID.fullmatch(run_id):
        raise InvalidArgument(field, "must be 1-128 of [A-Za-z0-9._-], starting alphanumeric")


def tool_definition_problem(definition: pb.ToolDefinition) -> str | None:
    """Why a host tool definition is unusable, or ``None``."""
    if not TOOL_NAME.fullmatch(definition.name):
        return "name must be 1-64 of [A-Za-z0-9_-]"
    problem = schema_text_problem(definition.input_schema_json or '{"type": "object"}')
    if problem is not None:
        return problem
    if definition.timeout.seconds < 0 or definition.timeout.nanos < 0:
        return "timeout must not be negative"
    return None


def check_agent(
    agent: pb.AgentSpec, field: str, tool_known: Callable[[str], bool], *, with_tools: bool
) -> None:
    """Validate one agent spec (tools must be known to ``tool_known``)."""
    _text(agent.name, f"{field}.name", limit=128)
    if "/" in agent.name:
        raise InvalidArgument(f"{field}.name", "must not contain '/'")
    if agent.provider not in PROVIDERS:
        raise InvalidArgument(f"{field}.provider", f"must be one of {', '.join(PROVIDERS)}")
    if agent.provider != "scripted":
        _text(agent.model, f"{field}.model", limit=256)
    if not 0 <= agent.max_turns <= 1000:
        raise InvalidArgument(f"{field}.max_turns", "must be 0..1000 (0 = default 10)")
    _text(agent.system_prompt, f"{field}.system_prompt", required=False)
    for index, turn in enumerate(agent.scripted.turns):
        where = f"{field}.scripted.turns[{index}]"
        _text(turn.text, f"{where}.text", required=False)
        for call_index, call in enumerate(turn.tool_calls):
            call_field = f"{where}.tool_calls[{call_index}]"
            if not TOOL_NAME.fullmatch(call.name):
                raise InvalidArgument(f"{call_field}.name", "must be 1-64 of [A-Za-z0-9_-]")
            if not isinstance(_json_object(call.input_json, f"{call_field}.input_json"), dict):
                raise InvalidArgument(f"{call_field}.input_json", "must be a JSON object")
    delay = agent.scripted.delay
    if delay.seconds < 0 or delay.nanos < 0 or delay.seconds > 3600:
        raise InvalidArgument(f"{field}.scripted.delay", "must be 0..3600 s")
    if with_tools:
        seen: set[str] = set()
        for index, name in enumerate(agent.tools):
            where = f"{field}.tools[{index}]"
            if name in seen:
                raise InvalidArgument(where, f"duplicate tool {name!r}")
            seen.add(name)
            check_tool_known(name, where, tool_known)
    elif agent.tools:
        raise InvalidArgument(f"{field}.tools", "the coordinator cannot have tools")


def check_tool_known(name: str, field: str, tool_known: Callable[[str], bool]) -> None:
    """Refuse a tool name the run cannot have.

    Raises:
        InvalidArgument: ``tool_known(name)`` is false (reason ``UNKNOWN_TOOL``, naming
            ``field``).
    """
    if not tool_known(name):
        raise InvalidArgument(
            field,
            f"unknown tool {name!r}: not registered by a connected host, not in "
            "team.host_tools and not a Python tool of this sidecar",
            reason="UNKNOWN_TOOL",
        )


def parse_json(text: str) -> object:
    """``json.loads`` whose only failure is ``ValueError`` (also for too deeply nested JSON).

    Raises:
        ValueError: ``text`` is not JSON, or nests deeper than Python's recursion allows.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _json_object(text: str, field: str) -> object:
    if not text:
        return {}
    try:
        return parse_json(text)
    except ValueError as exc:
        raise InvalidArgument(field, f"is not valid JSON: {exc}") from None


def check_team(team: pb.TeamSpec, field: str, tool_known: Callable[[str], bool]) -> None:
    """Validate a team spec."""
    _text(team.name, f"{field}.name", limit=128)
    if not team.agents:
        raise InvalidArgument(f"{field}.agents", "needs at least one agent")
    if len(team.agents) > MAX_AGENTS:
        raise InvalidArgument(f"{field}.agents", f"at most {MAX_AGENTS} agents")
    for index, definition in enumerate(team.host_tools):
        problem = tool_definition_problem(definition)
        if problem is not None:
            raise InvalidArgument(f"{field}.host_tools[{index}]", problem)
    names: set[str] = set()
    for index, agent in enumerate(team.agents):
        check_agent(agent, f"{field}.agents[{index}]", tool_known, with_tools=True)
        if agent.name in names:
            raise InvalidArgument(f"{field}.agents[{index}].name", f"duplicate {agent.name!r}")
        names.add(agent.name)


def check_tasks(
    tasks: Sequence[pb.TaskSpec], field: str, roster: set[str], *, ids_only: bool
) -> None:
    """Validate a task graph: ids, titles, assignees, dependencies and cycles."""
    if not tasks:
        raise InvalidArgument(field, "needs at least one task")
    if len(tasks) > MAX_TASKS:
        raise InvalidArgument(field, f"at most {MAX_TASKS} tasks")
    ids: dict[str, int] = {}
    titles: dict[str, list[int]] = {}
    for index, task in enumerate(tasks):
        where = f"{field}[{index}]"
        _text(task.title, f"{where}.title", limit=1000)
        _text(task.description, f"{where}.description")
        if ids_only:
            _text(task.id, f"{where}.id", limit=256)
        if task.id:
            if ":" in task.id:  # as a run id may not: the key would name two calls alike
                raise InvalidArgument(
                    f"{where}.id",
                    "must not contain ':', the separator of a tool call's idempotency key "
                    "(run:task:call)",
                )
            if task.id in ids:
                raise InvalidArgument(f"{where}.id", f"duplicate task id {task.id!r}")
            ids[task.id] = index
        if task.assignee and task.assignee not in roster:
            raise InvalidArgument(f"{where}.assignee", f"no agent {task.assignee!r} in the team")
        if not 0 <= task.max_retries <= 100:
            raise InvalidArgument(f"{where}.max_retries", "must be 0..100")
        titles.setdefault(task.title.strip().lower(), []).append(index)
    graph: dict[int, list[int]] = {}
    for index, task in enumerate(tasks):
        deps: list[int] = []
        for dep_index, ref in enumerate(task.depends_on):
            where = f"{field}[{index}].depends_on[{dep_index}]"
            if ref in ids:
                target = ids[ref]
            elif not ids_only and len(titles.get(ref.strip().lower(), [])) == 1:
                target = titles[ref.strip().lower()][0]
            else:
                raise InvalidArgument(
                    where, f"unknown or ambiguous task {ref!r}", reason="INVALID_TASK_DEPENDENCIES"
                )
            if target == index:
                raise InvalidArgument(where, "a task cannot depend on itself")
            deps.append(target)
        graph[index] = deps
    _check_acyclic(graph, field)


def _check_acyclic(graph: Mapping[int, Sequence[int]], field: str) -> None:
    state: dict[int, int] = {}
    for root in graph:
        stack: list[tuple[int, int]] = [(root, 0)]
        while stack:
            node, position = stack.pop()
            if position == 0:
                if state.get(node) == 2:
                    continue
                state[node] = 1
            deps = graph.get(node, ())
            if position < len(deps):
                stack.append((node, position + 1))
                dep = deps[position]
                if state.get(dep) == 1:
                    raise InvalidArgument(
                        f"{field}[{node}].depends_on",
                        "dependency cycle",
                        reason="INVALID_TASK_DEPENDENCIES",
                    )
                if not state.get(dep):
                    stack.append((dep, 0))
            else:
                state[node] = 2


def check_start(request: pb.StartRunRequest, tool_known: Callable[[str], bool]) -> None:
    """Validate a StartRunRequest (everything but the store and whether this build has
    approval gates); every tool it names, an agent's or an approval gate's, must be known to
    ``tool_known``."""
    if request.run_id:
        check_run_id(request.run_id)
    _text(request.request_id, "request_id", limit=128)
    if not request.HasField("team"):
        raise InvalidArgument("team", "is required")
    check_team(request.team, "team", tool_known)
    roster = {agent.name for agent in request.team.agents}
    mode = request.WhichOneof("mode")
    if mode is None:
        raise InvalidArgument("mode", "one of goal, tasks or plan is required")
    if mode == "goal":
        _text(request.goal.goal, "goal.goal")
        if request.goal.HasField("coordinator"):
            check_agent(request.goal.coordinator, "goal.coordinator", tool_known, with_tools=False)
    elif mode == "tasks":
        check_tasks(request.tasks.tasks, "tasks.tasks", roster, ids_only=False)
        check_task_metadata(request.tasks.tasks, "tasks.tasks")
    else:
        if request.plan.version != 1:
            raise InvalidArgument("plan.version", "must be 1", reason="UNSUPPORTED_PLAN_VERSION")
        check_tasks(request.plan.tasks, "plan.tasks", roster, ids_only=True)
        # A plan's tasks take no metadata to the run, but the run's spec keeps what was sent.
        check_task_metadata(request.plan.tasks, "plan.tasks")
    if request.HasField("metadata"):
        check_run_metadata(request.metadata)
    if request.conflict_policy not in pb.ConflictPolicy.values():
        raise InvalidArgument("conflict_policy", f"unknown value {request.conflict_policy}")
    if not 0 <= request.max_concurrency <= 256:
        raise InvalidArgument("max_concurrency", "must be 0..256 (0 = default 4)")
    _text(request.checkpoint.key, "checkpoint.key", required=False, limit=512)
    # A gate on a tool the run cannot have would never suspend anything: refused like an
    # agent's unknown tool, not accepted as a gate that silently guards nothing.
    for index, name in enumerate(request.approval_gates.tool_calls):
        check_tool_known(name, f"approval_gates.tool_calls[{index}]", tool_known)


# -- building oma_actors values --------------------------------------------------------------


def agent_config(spec: pb.AgentSpec, tools: Sequence[Tool]) -> AgentConfig:
    """An ``AgentConfig`` for ``spec`` with its resolved ``tools``."""
    scripted = spec.provider == "scripted"
    return AgentConfig(
        spec.name,
        model=spec.model or ("scripted" if scripted else ""),
        provider=None if scripted else spec.provider,
        system_prompt=spec.system_prompt or None,
        tools=tools,
        max_turns=spec.max_turns or 10,
        adapter=scripted_adapter(spec.scripted) if scripted else None,
        base_url=spec.base_url or None,
    )


def team_of(spec: pb.TeamSpec, tools_of: Callable[[pb.AgentSpec], Sequence[Tool]]) -> Team:
    """A ``Team`` for ``spec``; ``tools_of`` resolves each agent's tool names."""
    agents = [agent_config(agent, tools_of(agent)) for agent in spec.agents]
    return Team(spec.name, agents, shared_memory=spec.shared_memory)


def check_task_metadata(specs: Sequence[pb.TaskSpec], field: str) -> None:
    """Each task's metadata follows OMA's rules (``Task`` checks them), before the run exists.

    Raises:
        InvalidArgument: ``<field>[i].metadata`` breaks a rule (the message names the key).
    """
    for index, spec in enumerate(specs):
        if spec.HasField("metadata"):
            where = f"{field}[{index}].metadata"
            metadata = _members(spec.metadata, where)
            try:
                Task("", "", id=spec.id or f"#{index}", metadata=metadata)
            except TaskGraphError as exc:
                raise InvalidArgument(where, str(exc)) from None


RUN_METADATA = "metadata"
"""The field of a run's own metadata (``StartRunRequest.metadata``)."""
_RUN = "run"
"""The name the rules of task metadata give the run's metadata in their messages."""


def check_run_metadata(metadata: struct_pb2.Struct, field: str = RUN_METADATA) -> None:
    """A run's own metadata follows the rules of task metadata (``oma_actors.domain.metadata``):
    JSON values, named keys, no credential-like key, bounded size.

    Raises:
        InvalidArgument: naming ``metadata.<key>``, the first member that breaks a rule on its
            own (a credential-like or malformed key, one nested in it, NaN, too deep, too big),
            else ``metadata`` (too many keys or bytes in all).
    """
    members = _members(metadata, field)
    try:
        Task("", "", id=_RUN, metadata=members)  # a task's metadata rules, as Task applies them
    except TaskGraphError as whole:
        for key, value in members.items():
            try:
                Task("", "", id=_RUN, metadata={key: value})
            except TaskGraphError as exc:
                raise InvalidArgument(f"{field}.{key}", _problem(exc)) from None
        raise InvalidArgument(field, _problem(whole)) from None


def _problem(error: TaskGraphError) -> str:
    """The rules' message on the run's metadata, without the task it names."""
    return str(error).removeprefix(f"task {_RUN!r}: ")


def _members(metadata: struct_pb2.Struct, field: str) -> dict[str, Any]:
    """The members of a ``Struct`` as JSON values.

    Raises:
        InvalidArgument: a member holds a NaN or an infinity, which no JSON text can (naming
            ``<field>.<key>``).
    """
    members: dict[str, Any] = {}
    for key, value in metadata.fields.items():
        try:
            members[key] = json_format.MessageToDict(value)
        except (ValueError, json_format.Error):
            raise InvalidArgument(
                f"{field}.{key}", "holds NaN or Infinity, which JSON has not"
            ) from None
    return members


def mask_metadata(spec: pb.StartRunRequest) -> None:
    """Mask in place the secret-looking values of ``spec``'s metadata, the run's and each
    task's, as the run's queue masks a task's (``redact_object``, spec T-95).

    For the spec a run keeps: what it stores and shows holds ``[redacted]`` where a checkpoint
    of the run does. ``spec`` passed ``check_start`` (its metadata is JSON).
    """
    structs = [spec.metadata] if spec.HasField("metadata") else []
    mode = spec.WhichOneof("mode")
    tasks = spec.tasks.tasks if mode == "tasks" else spec.plan.tasks if mode == "plan" else ()
    structs.extend(task.metadata for task in tasks if task.HasField("metadata"))
    for struct in structs:
        masked = dict_to_struct(redact_object(struct_to_dict(struct)))
        if masked != struct:
            struct.CopyFrom(masked)


def tasks_of(specs: Sequence[pb.TaskSpec]) -> list[Task]:
    """The ``Task``s of a task list."""
    return [
        Task(
            spec.title,
            spec.description,
            id=spec.id or None,
            assignee=spec.assignee or None,
            depends_on=list(spec.depends_on),
            max_retries=spec.max_retries,
            metadata=struct_to_dict(spec.metadata) if spec.HasField("metadata") else None,
        )
        for spec in specs
    ]


def plan_of(spec: pb.PlanArtifact) -> PlanArtifact:
    """The ``PlanArtifact`` of a plan message."""
    return PlanArtifact(
        tuple(
            PlanTask(
                task.id,
                task.title,
                task.description,
                assignee=task.assignee or None,
                depends_on=tuple(task.depends_on),
            )
            for task in spec.tasks
        ),
        goal=spec.goal or None,
        version=spec.version,
    )


def task_counts(tasks: Sequence[pb.TaskState]) -> pb.TaskCounts:
    """How many tasks are in each status."""
    counts = pb.TaskCounts()
    names = {status: name for name, status in TASK_STATUS.items()}
    for task in tasks:
        name = names.get(task.status)
        if name is not None:
            setattr(counts, name, getattr(counts, name) + 1)
    return counts


def now() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(UTC)


def timestamp(moment: datetime) -> Timestamp:
    """A protobuf timestamp of an aware datetime."""
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def struct_to_dict(value: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as a plain dict."""
    converted: dict[str, Any] = json_format.MessageToDict(value)
    return converted


def dict_to_struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    """A JSON-safe mapping as a Struct (non-JSON values become strings)."""
    struct = struct_pb2.Struct()
    struct.update(json.loads(json.dumps(value, default=str)))
    return struct
