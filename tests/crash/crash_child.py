"""The child process of the crash tests (crash matrix 3.2): one scenario against a FileStore.

Run as ``python tests/crash/crash_child.py --scenario NAME --state-dir D --ledger-dir L
[--resume] [--crash POINT] [--tool-mode MODE] [--gate GATE]``. It builds the scenario's team,
tasks and tools deterministically, runs it (or restores it with ``--resume``) against
``D/store.json`` and writes the ledgers the parent asserts over:

- ``L/effects.jsonl``: every tool call's ``enter`` / ``effect`` / ``dedupe`` / ``return``,
  appended with ``O_APPEND`` and fsynced line by line, so a line written before ``os._exit``
  survives the crash.
- ``L/model_calls.jsonl``: every model call (``pid``, ``agent``, ``role``, ``task``, ``turn`` and
  the tool results the model was shown). The scripted model's answer is a pure function of the
  conversation, so a restored process continues exactly where the crashed one stopped.
- ``L/events-<pid>.jsonl``: every progress event by type name with its key fields.
- ``L/result.json``: the essentials of the ``TeamRunResult`` (only when the process finishes).
- ``L/gates.jsonl``: every call of the approval gates (``--approval tool|dispatch``), so the
  parent can count how often a gate was asked across processes.
- ``L/lost_writes.jsonl``: the pending approvals of a checkpoint write a ``store:*:before``
  crash stopped (what the process was about to make durable when it died).

``python tests/crash/crash_child.py decide --store F --id ID --hash H --decision approve|reject
--reviewer NAME [--crash before|after]`` is a reviewer process instead: it records one decision
with ``decide_approval`` (optionally crashing around the ledger's compare-and-set) and prints the
outcome as one JSON line.

A crash ends the process with exit code 86 (``os._exit``: no ``finally``, no buffered I/O); the
``kill:*`` points instead print ``READY`` and block until the parent sends SIGKILL. The module
imports nothing from pytest, so the tests can also build the same team in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiofiles.os
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    Allow,
    ApprovalPending,
    ChatOptions,
    CheckpointOptions,
    DurableApprovalError,
    FileStore,
    LLMResponse,
    Message,
    OpenMultiAgent,
    ProgressEvent,
    Reviewer,
    Suspend,
    Task,
    TaskState,
    Team,
    TeamRunResult,
    TextBlock,
    TokenUsage,
    Tool,
    ToolCalled,
    ToolContext,
    ToolResultBlock,
    ToolUseBlock,
    define_tool,
)
from oma_actors.approvals import APPROVAL_KEY_PREFIX, decide_approval
from oma_actors.approvals.gates import ToolCallRequest
from oma_actors.clock import to_iso
from oma_actors.stores.base import MemoryStore
from oma_actors.testing.faults import CrashingStore, Predicate
from oma_actors.testing.scripted import ScriptedAdapter

CRASH_EXIT = 86
RUN_ID = "crash-run"
STORE_FILE = "store.json"
CHECKPOINT_KEY = f"__oma_checkpoint__/{RUN_ID}/latest"
GOAL = "Produce the alpha and beta results"
TOOL_MODES = ("default", "idempotent", "unsafe")
APPROVAL_SCOPES = ("tool", "dispatch")  # which gate of --approval suspends
GATED_LABEL = "A"  # --approval tool: the ledger call with this label is suspended
GATED_TASK = "alpha"  # --approval dispatch: this task's dispatch is suspended

# -- scenarios ----------------------------------------------------------------------------------

Step = list[str] | None  # tool call labels of one assistant turn; None: the final answer

# Worker scripts per scenario: task title -> one step per model turn.
SCRIPTS: dict[str, dict[str, list[Step]]] = {
    "chain": {"alpha": [["A"], None], "beta": [None]},
    "parallel": {"alpha": [["P", "Q"], None], "beta": [None]},
    "witherror": {"alpha": [["P", "boom"], None], "beta": [None]},
    "team": {"alpha": [["A"], None], "beta": [None]},
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


# -- ledgers ------------------------------------------------------------------------------------


def append_line(path: Path, record: dict[str, Any], *, sync: bool = False) -> None:
    """Append one JSON line with a single unbuffered write (O_APPEND), optionally fsynced."""
    data = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSON-lines ledger (an absent file is empty)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def crash_now(reason: str) -> None:
    """End the process like a crash: exit code 86, nothing flushed or cleaned up."""
    os.write(2, f"crash_child: os._exit({CRASH_EXIT}) at {reason}\n".encode())
    os._exit(CRASH_EXIT)


def ready_and_block(reason: str) -> None:
    """Tell the parent we reached the boundary, then block (the parent sends SIGKILL)."""
    os.write(1, f"READY {reason}\n".encode())
    os.read(0, 1)  # the parent never writes; EOF means the parent is gone
    os._exit(87)


# -- the ledger tool ----------------------------------------------------------------------------


class LedgerArgs(BaseModel):
    """Input of the ledger tool."""

    label: str


@dataclasses.dataclass
class ToolBehaviour:
    """How the ledger tool behaves in this process (crash points and gates apply to P1 only)."""

    mode: str = "default"
    crash: str | None = None  # before_effect | after_effect | after_return | kill_after_effect
    crash_label: str = "A"
    gate: str | None = None  # q_before_effect | q_after_effect | a_before_effect
    run_attempt: int = 1
    q_effect_done: asyncio.Event | None = None
    entered: asyncio.Event | None = None  # set whenever the tool is entered (in-process tests)


def make_ledger_tool(ledger: Path, behaviour: ToolBehaviour) -> Tool:
    """The ``ledger`` tool: records enter / effect / return in ``effects.jsonl``.

    Modes: ``default`` (effect every time it runs), ``idempotent`` (dedupe on the key
    ``run_id:task_id:tool_call_id`` against the ledger before the effect) and ``unsafe``
    (declared ``effect="unsafe"``, so the runtime writes a dispatch record first). The label
    ``boom`` raises after ``enter`` (an error result, no effect).
    """
    effects = ledger / "effects.jsonl"
    crashed: set[str] = set()

    def log(ctx: ToolContext, phase: str, label: str) -> None:
        append_line(
            effects,
            {
                "pid": os.getpid(),
                "attempt": behaviour.run_attempt,
                "task_attempt": ctx.attempt,
                "tool_call_id": ctx.tool_call_id,
                "phase": phase,
                "key": ctx.idempotency_key,
                "label": label,
            },
            sync=True,
        )

    def crash_point(point: str, label: str) -> bool:
        if behaviour.crash != point or label != behaviour.crash_label or label in crashed:
            return False
        crashed.add(label)
        return True

    async def execute(args: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(args, LedgerArgs)
        label = args.label
        log(ctx, "enter", label)
        if behaviour.entered is not None:
            behaviour.entered.set()
        if crash_point("before_effect", label):
            crash_now(f"tool {label} before effect")
        if label == "boom":
            raise RuntimeError("boom: the tool failed")
        if (behaviour.gate, label) in (("q_before_effect", "Q"), ("a_before_effect", "A")):
            await asyncio.Event().wait()  # never reaches its effect in this process
        if label == "P" and behaviour.gate == "q_after_effect":
            assert behaviour.q_effect_done is not None
            await behaviour.q_effect_done.wait()  # Q's effect happens before P commits
        done = behaviour.mode == "idempotent" and any(
            line["phase"] == "effect" and line["key"] == ctx.idempotency_key
            for line in read_jsonl(effects)
        )
        log(ctx, "dedupe" if done else "effect", label)
        if crash_point("after_effect", label):
            crash_now(f"tool {label} after effect")
        if crash_point("kill_after_effect", label):
            ready_and_block(f"tool {label} after effect")
        if behaviour.gate == "q_after_effect" and label == "Q":
            assert behaviour.q_effect_done is not None
            behaviour.q_effect_done.set()
            await asyncio.Event().wait()  # Q's effect is done, but it never returns here
        log(ctx, "return", label)
        if crash_point("after_return", label):
            # Exit on the next loop iteration: the tool has returned, its commit is not durable.
            asyncio.get_running_loop().call_soon(crash_now, f"tool {label} after return")
        return f"ok:{label}:{ctx.tool_call_id}"

    return define_tool(
        name="ledger",
        description="Records an external effect in the test ledger.",
        input_model=LedgerArgs,
        execute=execute,
        effect="unsafe" if behaviour.mode == "unsafe" else "idempotent",
    )


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
    context = prompt.split("## Context from completed dependencies", 1)
    deps = f" deps={_digest(context[1])}" if len(context) == 2 else ""
    return LLMResponse(
        [TextBlock(f"{task} done results=[{', '.join(results)}]{deps}")], usage=usage
    )


def make_adapter(
    scenario: str, agent: str, ledger: Path, *, crash_on: tuple[str, str] | None = None
) -> ScriptedAdapter:
    """A scripted adapter for ``agent`` that logs every call to ``model_calls.jsonl``."""
    calls_file = ledger / "model_calls.jsonl"

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
    """
    gates_file = ledger / "gates.jsonl"

    def log(gate: str, target: str, answer: str) -> None:
        record = {"pid": os.getpid(), "gate": gate, "target": target, "answer": answer}
        append_line(gates_file, record, sync=True)

    def on_tool_call(call: ToolCallRequest) -> Allow | Suspend:
        gated = call.input.get("label") == GATED_LABEL
        log("tool", call.tool_call_id, "suspend" if gated else "allow")
        return Suspend("needs a human") if gated else Allow()

    def on_task_dispatch(task: TaskState) -> Allow | Suspend:
        gated = task.title == GATED_TASK
        log("dispatch", task.title, "suspend" if gated else "allow")
        return Suspend("needs a human") if gated else Allow()

    if scope == "tool":
        return {"on_tool_call": on_tool_call}
    if scope == "dispatch":
        return {"on_task_dispatch": on_task_dispatch}
    return {}


# -- building and running -----------------------------------------------------------------------


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


def event_record(event: ProgressEvent) -> dict[str, Any]:
    """An event's type name and its scalar fields (plus the result output, if any)."""
    record: dict[str, Any] = {"type": type(event).__name__, "pid": os.getpid()}
    for item in dataclasses.fields(event):
        value = getattr(event, item.name)
        if value is None or isinstance(value, str | int | bool | float):
            record[item.name] = value
        elif item.name == "result":
            record["output"] = getattr(value, "output", None)
    if isinstance(event, ApprovalPending):
        request = event.request
        record.update(request_id=request.id, request_hash=request.request_hash, scope=request.scope)
    return record


def make_sink(ledger: Path, crash: str | None) -> Callable[[ProgressEvent], None]:
    """The ``on_progress`` sink; with ``hook:tool_called`` it exits on a fresh ToolCalled.

    With ``kill:approval_pending`` it reports READY (and blocks for SIGKILL) once an
    ``ApprovalPending`` was emitted, i.e. once the suspension is durable and reported.
    """
    events = ledger / f"events-{os.getpid()}.jsonl"

    def sink(event: ProgressEvent) -> None:
        append_line(events, event_record(event))
        if crash == "hook:tool_called" and isinstance(event, ToolCalled) and not event.replayed:
            crash_now(f"on_progress hook after ToolCalled {event.tool_call_id}")
        if crash == "kill:approval_pending" and isinstance(event, ApprovalPending):
            ready_and_block(f"ApprovalPending {event.request.id}")

    return sink


def result_record(result: TeamRunResult) -> dict[str, Any]:
    """The essentials of a ``TeamRunResult``, keyed by task title (stable across processes)."""
    tasks: dict[str, Any] = {}
    for task in result.tasks:
        agent_result = result.task_results.get(task.id)
        tasks[task.title] = {
            "id": task.id,
            "status": task.status,
            "result": task.result,
            "output": agent_result.output if agent_result else None,
            "success": agent_result.success if agent_result else None,
            "turns": agent_result.turns if agent_result else None,
            "usage": (
                [agent_result.token_usage.input_tokens, agent_result.token_usage.output_tokens]
                if agent_result
                else None
            ),
            "tool_calls": (
                [[call.tool_name, call.output] for call in agent_result.tool_calls]
                if agent_result
                else None
            ),
        }
    coordinator = result.agent_results.get("coordinator")
    return {
        "pid": os.getpid(),
        "run_id": result.run_id,
        "attempt": result.attempt,
        "success": result.success,
        "status": result.status.code,
        "status_message": result.status.message,
        "tasks": tasks,
        "coordinator": coordinator.output if coordinator is not None else None,
        "token_usage": [result.token_usage.input_tokens, result.token_usage.output_tokens],
        "pending_approvals": [
            {"id": r.id, "hash": r.request_hash, "scope": r.scope, "boundary": r.boundary}
            for r in result.pending_approvals
        ],
        "approval_decisions": [
            {
                "request_id": d.request_id,
                "hash": d.request_hash,
                "scope": d.scope,
                "decision": d.decision,
                "reviewer": d.reviewer.id,
                "decided_at": to_iso(d.decided_at),
            }
            for d in result.approval_decisions
        ],
    }


# -- crash points -------------------------------------------------------------------------------


def _task_id(snapshot: Any, title: str) -> str | None:
    for task in snapshot.get("queue", {}).get("tasks", []):
        if task.get("title") == title:
            return str(task["id"])
    return None


def _in_flight(snapshot: Any, title: str = "alpha") -> dict[str, Any] | None:
    if not isinstance(snapshot, dict):
        return None
    task_id = _task_id(snapshot, title)
    for entry in snapshot.get("inFlightTasks") or []:
        if entry.get("taskId") == task_id:
            return dict(entry)
    return None


def _pending(snapshot: Any) -> list[dict[str, Any]] | None:
    entry = _in_flight(snapshot)
    if entry is None or entry.get("phase") != "executing_tools":
        return None
    return list(entry.get("pendingToolCalls") or [])


def _committed(item: dict[str, Any]) -> bool:
    return item.get("commit") is not None


def _call_label(item: dict[str, Any]) -> str:
    return str(item["call"]["input"].get("label"))


def assistant_saved(_: str, snapshot: Any) -> bool:
    """The assistant tool turn is saved: no commit and no dispatch mark yet."""
    pending = _pending(snapshot) or []
    return bool(pending) and not any(_committed(c) or c.get("dispatched") for c in pending)


def some_commit(_: str, snapshot: Any) -> bool:
    """A commit record for one of alpha's calls is in the snapshot."""
    pending = _pending(snapshot) or []
    return bool(pending) and any(_committed(c) for c in pending)


def all_committed(_: str, snapshot: Any) -> bool:
    """Every pending call of alpha's turn is committed (before the results message)."""
    pending = _pending(snapshot) or []
    return bool(pending) and all(_committed(c) for c in pending)


def p_not_q(_: str, snapshot: Any) -> bool:
    """Sibling P is committed, Q is not."""
    pending = _pending(snapshot) or []
    state = {_call_label(c): _committed(c) for c in pending}
    return state.get("P") is True and state.get("Q") is False


def alpha_completed(_: str, snapshot: Any) -> bool:
    """Alpha's runner reached ``phase=completed`` (the queue does not know yet)."""
    entry = _in_flight(snapshot)
    return entry is not None and entry.get("phase") == "completed"


def alpha_in_queue(_: str, snapshot: Any) -> bool:
    """The queue marks alpha completed."""
    if not isinstance(snapshot, dict):
        return False
    return _task_id(snapshot, "alpha") in snapshot.get("queue", {}).get("completed", [])


def suspension_saved(_: str, snapshot: Any) -> bool:
    """The checkpoint about to be written lists pending approvals (a suspension save)."""
    return isinstance(snapshot, dict) and bool(snapshot.get("pendingApprovals"))


STORE_CRASHES: dict[str, tuple[Predicate | None, str]] = {
    "store:first:before": (None, "before"),
    "store:first:after": (None, "after"),
    "store:assistant_saved:after": (assistant_saved, "after"),
    "store:commit:before": (some_commit, "before"),
    "store:all_committed:after": (all_committed, "after"),
    "store:p_not_q:after": (p_not_q, "after"),
    "store:alpha_completed:after": (alpha_completed, "after"),
    "store:alpha_completed:before": (alpha_completed, "before"),
    "store:alpha_in_queue:after": (alpha_in_queue, "after"),
    "store:suspension:before": (suspension_saved, "before"),
}
TOOL_CRASHES = {
    "tool:before_effect": "before_effect",
    "tool:after_effect": "after_effect",
    "tool:after_return": "after_return",
    "kill:tool_after_effect": "kill_after_effect",
}
OTHER_CRASHES = (
    "store:approval_row:before",  # the first approval-row compare_and_set never lands
    "kill:approval_pending",
    "hook:tool_called",
    "model:synthesis",
    "kill:replace_commit",
    "exit:replace_commit",
)
CRASH_POINTS = (*STORE_CRASHES, *TOOL_CRASHES, *OTHER_CRASHES)


def patch_replace(store_path: str, *, kill: bool) -> None:
    """Stop a FileStore write of ``store_path`` after its temp file is written, before the rename.

    Only the write whose new checkpoint holds a commit of alpha's call is stopped: with
    ``kill`` the child prints READY and blocks for SIGKILL, otherwise it exits with 86.
    Both ``os.replace`` and ``aiofiles.os.replace`` (which binds ``os.replace`` at import) are
    patched, whichever the store uses.
    """
    original_os = os.replace
    original_aio = aiofiles.os.replace

    def stop_here(src: Any, dst: Any) -> bool:
        if os.path.abspath(os.fspath(dst)) != store_path:
            return False
        try:
            document = json.loads(Path(os.fspath(src)).read_bytes())
            entry = next(e for e in document["entries"] if e["key"] == CHECKPOINT_KEY)
            return some_commit(CHECKPOINT_KEY, json.loads(entry["value"]))
        except (StopIteration, KeyError, ValueError, OSError):
            return False

    def stop(src: Any) -> None:
        reason = f"rename of {os.path.basename(os.fspath(src))}"
        if kill:
            ready_and_block(reason)
        crash_now(reason)

    def patched_os(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if stop_here(src, dst):
            stop(src)
        original_os(src, dst, *args, **kwargs)

    async def patched_aio(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if stop_here(src, dst):
            stop(src)
        await original_aio(src, dst, *args, **kwargs)

    os.replace = patched_os
    aiofiles.os.replace = patched_aio


def recording(predicate: Predicate | None, ledger: Path, when: str) -> Predicate | None:
    """``predicate``, also logging to ``lost_writes.jsonl`` what a ``before`` crash stops.

    The CrashingStore ends the process on the first accepted call, so the line logged last is
    the write that never landed: its pending approvals are what the process was about to save.
    """
    if predicate is None or when != "before":
        return predicate

    def check(key: str, snapshot: Any) -> bool:
        hit = predicate(key, snapshot)
        if hit:
            pending = snapshot.get("pendingApprovals") or [] if isinstance(snapshot, dict) else []
            record = {
                "pid": os.getpid(),
                "key": key,
                "pending": [{"id": r["id"], "hash": r["requestHash"]} for r in pending],
            }
            append_line(ledger / "lost_writes.jsonl", record, sync=True)
        return hit

    return check


def stored_attempt(store_path: Path) -> int | None:
    """``identity.attempt`` of the stored checkpoint, read from the file (None: no checkpoint)."""
    if not store_path.exists():
        return None
    document = json.loads(store_path.read_bytes())
    for entry in document["entries"]:
        if entry["key"] == CHECKPOINT_KEY:
            return int(json.loads(entry["value"])["identity"]["attempt"])
    return None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The child's command line; creates the state and ledger directories."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", required=True, choices=SCENARIOS)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--ledger-dir", required=True, type=Path)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--no-tasks", action="store_true", help="restore without tasks")
    parser.add_argument("--crash", choices=CRASH_POINTS)
    parser.add_argument("--tool-mode", default="default", choices=TOOL_MODES)
    parser.add_argument("--gate", choices=("q_before_effect", "q_after_effect", "a_before_effect"))
    parser.add_argument("--approval", choices=APPROVAL_SCOPES, help="the gate that suspends")
    args = parser.parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    args.ledger_dir.mkdir(parents=True, exist_ok=True)
    return args


async def main(args: argparse.Namespace) -> int:
    """Run or restore the scenario and write ``result.json``."""
    state_dir: Path = args.state_dir
    ledger: Path = args.ledger_dir
    store_path = state_dir / STORE_FILE
    crash: str | None = args.crash
    previous = stored_attempt(store_path)

    behaviour = ToolBehaviour(
        mode=args.tool_mode,
        crash=TOOL_CRASHES.get(crash or ""),
        gate=args.gate,
        run_attempt=(previous or 0) + 1 if args.resume else 1,
        q_effect_done=asyncio.Event(),
    )
    crash_on = ("coordinator", "synthesis") if crash == "model:synthesis" else None
    team, coordinator = build_team(args.scenario, ledger, behaviour, crash_on=crash_on)

    file_store = FileStore(store_path)
    store: MemoryStore = file_store
    if crash in STORE_CRASHES:
        predicate, when = STORE_CRASHES[crash]
        store = CrashingStore(
            file_store,
            predicate=recording(predicate, ledger, when),
            when="after" if when == "after" else "before",
        )
    if crash == "store:approval_row:before":
        store = CrashingStore(
            file_store, prefix=APPROVAL_KEY_PREFIX, op="compare_and_set", nth=1, when="before"
        )
    if crash in ("kill:replace_commit", "exit:replace_commit"):
        patch_replace(file_store.path, kill=crash.startswith("kill:"))

    orchestrator = OpenMultiAgent(
        on_progress=make_sink(ledger, crash),
        max_concurrency=1,
        **make_gates(ledger, args.approval),
    )
    options = CheckpointOptions(store=store, run_id=RUN_ID)
    team_mode = args.scenario == "team"
    if args.resume:
        tasks = None if (args.no_tasks or team_mode) else tasks_for(args.scenario)
        result = await orchestrator.restore(
            team, tasks, checkpoint=options, coordinator=coordinator
        )
        if team_mode and not result.tasks and not args.no_tasks:
            # Nothing was checkpointed before the crash: the application plans again.
            result = await orchestrator.run_team(
                team, GOAL, checkpoint=options, coordinator=coordinator
            )
    elif team_mode:
        result = await orchestrator.run_team(
            team, GOAL, checkpoint=options, coordinator=coordinator
        )
    else:
        result = await orchestrator.run_tasks(team, tasks_for(args.scenario), checkpoint=options)
    await file_store.aclose()
    (ledger / "result.json").write_text(json.dumps(result_record(result), indent=1, sort_keys=True))
    return 0


# -- the reviewer process -----------------------------------------------------------------------


def parse_decide_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line of the reviewer process (``crash_child.py decide ...``)."""
    parser = argparse.ArgumentParser(prog="crash_child.py decide")
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--id", required=True, dest="request_id")
    parser.add_argument("--hash", required=True, dest="request_hash")
    parser.add_argument("--decision", required=True, choices=("approve", "reject"))
    parser.add_argument("--reviewer", required=True)
    parser.add_argument("--crash", choices=("before", "after"))
    return parser.parse_args(argv)


async def decide_main(args: argparse.Namespace) -> int:
    """Record one decision with ``decide_approval``; print the outcome as one JSON line.

    With ``--crash`` the ledger's compare-and-set on the approval row is wrapped in a
    CrashingStore (``before``: the decision never lands; ``after``: it landed, the reviewer
    never hears so). Exit codes: 0 decided (or the same decision was already there), 1 refused
    (the ``DurableApprovalError`` code is printed), 86 crashed.
    """
    file_store = FileStore(args.store)
    store: MemoryStore = file_store
    if args.crash is not None:
        store = CrashingStore(
            file_store, prefix=APPROVAL_KEY_PREFIX, op="compare_and_set", when=args.crash
        )
    try:
        record = await decide_approval(
            store,
            request_id=args.request_id,
            request_hash=args.request_hash,
            decision=args.decision,
            reviewer=Reviewer(args.reviewer),
        )
    except DurableApprovalError as exc:
        print(json.dumps({"pid": os.getpid(), "error": exc.code, "message": str(exc)}))
        return 1
    finally:
        await file_store.aclose()
    decision = record.decision
    assert decision is not None
    outcome = {
        "pid": os.getpid(),
        "decision": decision.decision,
        "reviewer": decision.reviewer.id,
        "decided_at": to_iso(decision.decided_at),
    }
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["decide"]:
        sys.exit(asyncio.run(decide_main(parse_decide_args(sys.argv[2:]))))
    sys.exit(asyncio.run(main(parse_args())))
