"""The crash scenarios: team, tasks, scripted model and approval gates (crash matrix 3.2).

Every scenario is one ``worker`` with the ledger tool (``crash_tool``) and a ``coordinator``,
built the same way in every process. The scripted model's answer is a pure function of the
conversation (never a process-local counter), so a restored process continues exactly where the
crashed one stopped, and every model call is logged to ``model_calls.jsonl`` with the tool
results the model was shown. The module imports nothing from pytest, so the tests can also build
the same team in-process.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crash_ledger import GATES, MODEL_CALLS, append_line
from crash_tool import ToolBehaviour, make_ledger_tool
from crash_wiring import crash_now

from oma_actors import AgentConfig, Task, TaskState, Team, TokenUsage
from oma_actors.approvals import (
    Allow,
    ApprovalRequest,
    Suspend,
    create_approval_request,
    dispatch_content,
    tool_call_boundary,
    tool_call_content,
)
from oma_actors.approvals.gates import ToolCallRequest
from oma_actors.domain.approvals import ApprovalScope
from oma_actors.domain.jsonforms import task_to_json
from oma_actors.llm import (
    ChatOptions,
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.testing.scripted import ScriptedAdapter

RUN_ID = "crash-run"
STORE_FILE = "store.json"
CHECKPOINT_KEY = f"__oma_checkpoint__/{RUN_ID}/latest"
GOAL = "Produce the alpha and beta results"
TOOL_MODES = ("default", "idempotent", "unsafe")
APPROVAL_SCOPES = ("tool", "dispatch")  # which gate of --approval suspends
GATED_LABEL = "A"  # --approval tool: the ledger call with this label is suspended
GATED_TASK = "alpha"  # --approval dispatch: this task's dispatch is suspended

Step = list[str] | None  # tool call labels of one assistant turn; None: the final answer

# Worker scripts per scenario: task title -> one step per model turn.
SCRIPTS: dict[str, dict[str, list[Step]]] = {
    "chain": {"alpha": [["A"], None], "beta": [None]},
    "parallel": {"alpha": [["P", "Q"], None], "beta": [None]},
    "witherror": {"alpha": [["P", "boom"], None], "beta": [None]},
    "team": {"alpha": [["A"], None], "beta": [None]},
    "rounds": {"alpha": [["A"], ["B"], None], "beta": [None]},  # a task's second tool round
}
SCENARIOS = tuple(SCRIPTS)

PLAN = [
    {"title": "alpha", "description": "Call the ledger tool, then report.", "assignee": "worker"},
    {
        "title": "beta",
        "description": "Report on alpha's result.",
        "assignee": "worker",
        "dependsOn": ["alpha"],
    },
]


def tasks_for(scenario: str) -> list[Task]:
    """The explicit tasks of a ``run_tasks`` scenario, with fixed ids (empty for ``team``)."""
    if scenario == "team":
        return []
    return [
        Task("alpha", "Call the ledger tool, then report.", id="alpha", assignee="worker"),
        Task(
            "beta", "Report on alpha's result.", id="beta", assignee="worker", depends_on=["alpha"]
        ),
    ]


# -- the scripted model -------------------------------------------------------------------------


def _text(message: Message) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextBlock))


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block.text for block in content if isinstance(block, TextBlock))
    return str(content)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def classify(messages: Sequence[Message]) -> tuple[str, str]:
    """``(role, task)`` of a conversation from its first user message."""
    first = _text(messages[0]) if messages else ""
    if first.startswith("# Task: "):
        return "worker", first.splitlines()[0].removeprefix("# Task: ").strip()
    if first.startswith("## Original Goal"):
        return "coordinator", "synthesis"
    if "coordinate a team" in first:
        return "coordinator", "plan"
    return "unknown", first[:40]


def seen_results(messages: Sequence[Message]) -> list[list[Any]]:
    """The tool results of the last user message: ``[tool_use_id, text, is_error]``."""
    if not messages or messages[-1].role != "user":
        return []
    return [
        [block.tool_use_id, _content_text(block.content), block.is_error]
        for block in messages[-1].content
        if isinstance(block, ToolResultBlock)
    ]


def respond(
    scenario: str, role: str, task: str, turn: int, messages: Sequence[Message]
) -> LLMResponse:
    """The scripted answer: a pure function of the scenario and the conversation."""
    usage = TokenUsage(100 + 10 * turn + len(task), 7 + turn)
    if role == "coordinator" and task == "plan":
        return LLMResponse([TextBlock(json.dumps(PLAN))], usage=usage)
    if role == "coordinator":
        body = _text(messages[0]).split("## Completed Tasks", 1)[-1]
        return LLMResponse([TextBlock(f"SYNTHESIS {_digest(body)}")], usage=usage)
    steps = SCRIPTS[scenario].get(task, [None])
    step = steps[turn] if turn < len(steps) else None
    if step:
        calls = [
            ToolUseBlock(f"{task}-t{turn}-{label}", "ledger", {"label": label}) for label in step
        ]
        return LLMResponse(list(calls), stop_reason="tool_use", usage=usage)
    results = [
        f"{block.tool_use_id}={_content_text(block.content)}{'!' if block.is_error else ''}"
        for message in messages
        if message.role == "user"
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]
    prompt = _text(messages[0])
    context = prompt.split("## Context from prerequisite tasks", 1)
    deps = f" deps={_digest(context[1])}" if len(context) == 2 else ""
    return LLMResponse(
        [TextBlock(f"{task} done results=[{', '.join(results)}]{deps}")], usage=usage
    )


def make_adapter(
    scenario: str, agent: str, ledger: Path, *, crash_on: tuple[str, str] | None = None
) -> ScriptedAdapter:
    """A scripted adapter for ``agent`` that logs every call to ``model_calls.jsonl``."""
    calls_file = ledger / MODEL_CALLS

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        role, task = classify(messages)
        turn = sum(1 for message in messages if message.role == "assistant")
        append_line(
            calls_file,
            {
                "pid": os.getpid(),
                "agent": agent,
                "role": role,
                "task": task,
                "turn": turn,
                "seen": seen_results(messages),
            },
        )
        if crash_on == (role, task):
            crash_now(f"model call {role}/{task}")
        return respond(scenario, role, task, turn, messages)

    return ScriptedAdapter(script)


# -- approval gates -----------------------------------------------------------------------------


def make_gates(ledger: Path, scope: str | None) -> dict[str, Any]:
    """The ``OpenMultiAgent`` gate arguments of ``--approval scope``, logging to ``gates.jsonl``.

    ``tool``: ``on_tool_call`` suspends the ledger call labelled ``GATED_LABEL`` and allows every
    other call. ``dispatch``: ``on_task_dispatch`` suspends the dispatch of ``GATED_TASK`` and
    allows the others. The same gate is installed in every process, so a gate that is asked
    again after a restore shows up in the ledger (and would suspend again).

    A ``suspend`` line also carries the request that answer turns into, built with the public
    ``create_approval_request`` from exactly what the gate was shown (AP-05..AP-09: the id and
    hash are a function of run, scope, boundary and content). It is logged before the runtime
    saves anything, so it shows what a process that dies before its suspension save was about
    to make durable, without reading any store.
    """
    gates_file = ledger / GATES

    def log(gate: str, target: str, request: ApprovalRequest | None) -> None:
        record: dict[str, Any] = {"pid": os.getpid(), "gate": gate, "target": target}
        record["answer"] = "allow" if request is None else "suspend"
        if request is not None:
            record.update(request_id=request.id, request_hash=request.request_hash)
        append_line(gates_file, record, sync=True)

    def on_tool_call(call: ToolCallRequest) -> Allow | Suspend:
        if call.input.get("label") != GATED_LABEL:
            log("tool", call.tool_call_id, None)
            return Allow()
        assert call.task_id is not None
        content = tool_call_content(
            tool_name=call.tool_name,
            raw_input=call.raw_input,
            input=call.input,
            agent_name=call.agent_name,
            task_id=call.task_id,
            tool_call_id=call.tool_call_id,
        )
        boundary = tool_call_boundary(call.task_id, call.tool_call_id)
        log("tool", call.tool_call_id, _request("tool_call", boundary, content))
        return Suspend("needs a human")

    def on_task_dispatch(task: TaskState) -> Allow | Suspend:
        if task.title != GATED_TASK:
            log("dispatch", task.title, None)
            return Allow()
        content = dispatch_content(task_to_json(task))
        log("dispatch", task.title, _request("task_dispatch", task.id, content))
        return Suspend("needs a human")

    if scope == "tool":
        return {"on_tool_call": on_tool_call}
    if scope == "dispatch":
        return {"on_task_dispatch": on_task_dispatch}
    return {}


def _request(scope: ApprovalScope, boundary: str, content: dict[str, Any]) -> ApprovalRequest:
    return create_approval_request(run_id=RUN_ID, scope=scope, boundary=boundary, content=content)


# -- the team --------------------------------------------------------------------------------------


def build_team(
    scenario: str,
    ledger: Path,
    behaviour: ToolBehaviour,
    *,
    crash_on: tuple[str, str] | None = None,
) -> tuple[Team, AgentConfig]:
    """The scenario's team (one ``worker`` with the ledger tool) and its coordinator."""
    worker = AgentConfig(
        "worker",
        adapter=make_adapter(scenario, "worker", ledger, crash_on=crash_on),
        tools=[make_ledger_tool(ledger, behaviour)],
    )
    coordinator = AgentConfig(
        "coordinator",
        adapter=make_adapter(scenario, "coordinator", ledger, crash_on=crash_on),
        max_turns=3,
    )
    return Team("crash-team", [worker]), coordinator
