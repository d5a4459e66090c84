"""The values of the tool host: a host's session, an outstanding call, and their wire forms.

``sidecar.tool_host`` schedules deliveries and takes results; this module holds what it keeps
per session and per call, and the pure functions that check a ``Register`` and build a
``ToolCall`` message.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.convert import now, timestamp, tool_definition_problem
from sidecar.status import InvalidArgument

DEFAULT_MAX_CONCURRENT = 16


@dataclass(slots=True, kw_only=True)
class HostSession:
    """One open Connect stream."""

    session_id: str
    host_id: str
    tools: dict[str, pb.ToolDefinition]
    max_concurrent: int
    outbox: asyncio.Queue[pb.ToolServerMessage] = field(default_factory=asyncio.Queue)
    in_flight: set[str] = field(default_factory=set)
    draining: bool = False
    tenant: str = ""  # of the principal that opened it (sidecar.tenancy)


@dataclass(slots=True, kw_only=True)
class PendingCall:
    """A tool call waiting for its first result."""

    key: str
    run_id: str
    task_id: str
    tool_call_id: str
    tool_name: str
    agent: str
    input_json: str
    run_attempt: int
    future: asyncio.Future[pb.ToolResult]
    deadline_s: float  # the call's timeout, counted from ``created``
    created: datetime = field(default_factory=now)
    durable: bool = True
    tenant: str = ""  # of the run that made the call: only that tenant's hosts get it
    issued_before: bool = False  # an earlier attempt may have delivered it (sidecar.redelivery)
    delivery_attempt: int = 0
    call_ids: list[str] = field(default_factory=list)
    call_id: str | None = None
    session_id: str | None = None
    preferred_host: str | None = None
    prefer_until: float = 0.0


def sort_registration(
    register: pb.Register, reserved: frozenset[str]
) -> tuple[dict[str, pb.ToolDefinition], dict[str, str]]:
    """The accepted tools of a ``Register`` by name, and the rejected ones with the reason.

    Args:
        register: the host's first message.
        reserved: names of the sidecar's own Python tools, which a host cannot take.

    Raises:
        InvalidArgument: no host id, or a bad ``max_concurrent_calls``.
    """
    if not register.host_id.strip() or len(register.host_id) > 256:
        raise InvalidArgument("register.host_id", "is required (1-256 characters)")
    if not 0 <= register.max_concurrent_calls <= 10_000:
        raise InvalidArgument("register.max_concurrent_calls", "must be 0..10000")
    accepted: dict[str, pb.ToolDefinition] = {}
    rejected: dict[str, str] = {}
    for definition in register.tools:
        problem = tool_definition_problem(definition)
        if problem is None and definition.name in accepted:
            problem = "registered twice in this session"
        if problem is None and definition.name in reserved:
            problem = "clashes with a Python tool of the sidecar"
        if problem is not None:
            rejected[definition.name or "<unnamed>"] = problem
        else:
            accepted[definition.name] = definition
    return accepted, rejected


def call_message(pending: PendingCall, call_id: str) -> pb.ToolCall:
    """The ``ToolCall`` delivering ``pending`` as the delivery ``call_id``.

    Its ``deadline`` is the call's own (created + timeout), the same for every delivery: a
    redelivery gets only the time the call has left, not a fresh timeout.
    """
    return pb.ToolCall(
        call_id=call_id,
        run_id=pending.run_id,
        task_id=pending.task_id,
        tool_call_id=pending.tool_call_id,
        idempotency_key=pending.key,
        tool_name=pending.tool_name,
        input_json=pending.input_json,
        agent=pending.agent,
        run_attempt=pending.run_attempt,
        delivery_attempt=pending.delivery_attempt,
        deadline=timestamp(pending.created + timedelta(seconds=pending.deadline_s)),
        redelivery=pending.delivery_attempt > 1 or pending.issued_before,
    )
