"""Helpers of the sidecar tests: the token, a Python tool, scripted run requests, host tools,
and run records in the format before record schema 1."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from oma_actors import ToolContext, define_tool
from oma_actors.runs import MemoryStoreRunStore
from oma_actors.stores import AtomicStore, InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTool
from sidecar.record import RunRecordV1
from sidecar.record_codec import decode, encode

TOKEN = "test-token-" + "x" * 20
LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1}},
    "required": ["query"],
    "additionalProperties": False,
}


class EchoInput(BaseModel):
    text: str


async def _echo(args: EchoInput, ctx: ToolContext) -> str:
    return f"echo:{args.text}"


ECHO = define_tool(name="echo", description="Echo text.", input_model=EchoInput, execute=_echo)


def tool_turns(tool: str, arguments: dict[str, Any], final: str) -> pb.ScriptedModel:
    """A script: call ``tool`` once, then answer ``final`` (may use {{last_tool_result}})."""
    return pb.ScriptedModel(
        turns=[
            pb.ScriptedTurn(
                tool_calls=[pb.ScriptedToolCall(name=tool, input_json=json.dumps(arguments))]
            ),
            pb.ScriptedTurn(text=final),
        ]
    )


def run_request(
    run_id: str,
    *,
    tools: tuple[str, ...] = ("lookup",),
    arguments: dict[str, Any] | None = None,
    task_ids: tuple[str, ...] = ("t1", "t2"),
    store_uri: str = "",
) -> pb.StartRunRequest:
    """A chain of tasks for one scripted agent that calls ``tools[0]`` in every task."""
    script = tool_turns(tools[0], arguments or {"query": "q"}, "done: {{last_tool_result}}")
    agent = pb.AgentSpec(name="worker", provider="scripted", tools=list(tools), scripted=script)
    tasks = [
        pb.TaskSpec(
            id=task_id,
            title=f"Task {task_id}",
            description=f"Do {task_id}.",
            depends_on=[task_ids[index - 1]] if index else [],
        )
        for index, task_id in enumerate(task_ids)
    ]
    return pb.StartRunRequest(
        run_id=run_id,
        request_id=str(uuid.uuid4()),
        team=pb.TeamSpec(name="team", agents=[agent]),
        tasks=pb.TasksMode(tasks=tasks),
        checkpoint=pb.CheckpointOptions(store_uri=store_uri),
    )


def lookup_tool(handler: Any) -> HostTool:
    """The host tool ``lookup`` with ``handler``."""
    return HostTool(
        name="lookup", description="Look a query up.", input_schema=LOOKUP_SCHEMA, handler=handler
    )


async def answer(arguments: dict[str, Any], call: pb.ToolCall) -> str:
    """A lookup handler that answers at once."""
    return f"found {arguments['query']} for {call.task_id}"


async def lease_holder(store: AtomicStore, run_id: str) -> str:
    """Who holds ``run_id``: its run record's lease owner, and nothing else says it (D16)."""
    record = await MemoryStoreRunStore(store).get(run_id)
    assert record is not None
    assert record.lease is not None
    return record.lease.owner


async def eventually(check: Callable[[], bool], *, within: float = 5.0) -> None:
    """Wait until ``check()`` holds (polling), or fail after ``within`` seconds."""
    for _ in range(int(within / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")


def echo_tools() -> list[Any]:
    """An entry point target returning a list of tools (see test_sidecar_plugins)."""
    return [ECHO]


def legacy_record_text(
    request: pb.StartRunRequest,
    *,
    status: str = "RUN_STATUS_RUNNING",
    tasks: tuple[pb.TaskState, ...] = (),
    result: pb.RunResult | None = None,
    pending_approvals: tuple[str, ...] = (),
    seq_reserved_until: int = 1024,
) -> str:
    """A run record exactly as the sidecar before record schema 1 wrote it (base64 protobuf)."""

    def b64(message: Any) -> str:
        return base64.b64encode(message.SerializeToString(deterministic=True)).decode("ascii")

    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).isoformat()
    document = {
        "version": 1,
        "run_id": request.run_id,
        "request_id": request.request_id,
        "request": b64(request),
        "status": status,
        "attempt": 1,
        "created_at": moment,
        "updated_at": moment,
        "outcome": {"code": "", "message": ""},
        "tasks": [b64(task) for task in tasks],
        "result": b64(result) if result is not None else None,
        "pending_approvals": list(pending_approvals),
        "store_uri": "memory://",
        "seq_reserved_until": seq_reserved_until,
    }
    return json.dumps(document, separators=(",", ":"))


class SiblingWritesFirst(InMemoryStore):
    """A store where another sidecar writes the record just before our next compare-and-set:
    changes it (``sibling_change``), or creates it (``sibling_creates``)."""

    def __init__(self) -> None:
        super().__init__()
        self.sibling_change: Callable[[RunRecordV1], RunRecordV1] | None = None
        self.sibling_creates: RunRecordV1 | None = None

    async def compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        created, self.sibling_creates = self.sibling_creates, None
        if created is not None:
            await self.set(key, encode(created))
        change, self.sibling_change = self.sibling_change, None
        if change is not None:
            current = await self.get(key)
            assert current is not None
            await self.set(key, encode(change(decode(current.value))))
        return await super().compare_and_set(key, expected, value, metadata)
