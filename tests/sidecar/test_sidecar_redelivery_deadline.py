"""A redelivered host call carries the call's real deadline, not a fresh timeout."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta

from oma_actors import ToolContext
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.host_calls import PendingCall, call_message
from sidecar.tool_host import ToolHost

LOOKUP = pb.ToolDefinition(name="lookup", input_schema_json='{"type": "object"}')


def deadline_of(message: pb.ToolServerMessage) -> datetime:
    moment: datetime = message.call.deadline.ToDatetime(tzinfo=UTC)
    return moment


async def test_a_redelivery_keeps_the_deadline_of_the_first_delivery() -> None:
    host = ToolHost()
    first, _ = host.open_session(pb.Register(host_id="h", tools=[LOOKUP]))
    ctx = ToolContext(run_id="r1", task_id="t1", tool_call_id="toolu_1", agent_name="a")
    before = datetime.now(UTC)
    call = asyncio.create_task(host.call(ctx, "lookup", "{}", run_attempt=1, limit_s=30))
    try:
        delivered = await asyncio.wait_for(first.outbox.get(), 5)
        assert delivered.call.delivery_attempt == 1
        promised = deadline_of(delivered)
        assert before + timedelta(seconds=30) <= promised
        assert promised <= datetime.now(UTC) + timedelta(seconds=30)

        await asyncio.sleep(0.3)  # the call has used part of its 30 s
        host.close_session(first)
        second, _ = host.open_session(pb.Register(host_id="h", tools=[LOOKUP]))
        again = await asyncio.wait_for(second.outbox.get(), 5)
        assert again.WhichOneof("msg") == "call"
        assert (again.call.redelivery, again.call.delivery_attempt) == (True, 2)
        assert again.call.idempotency_key == delivered.call.idempotency_key
        # The same deadline: the timeout runs from the call's creation, not from this delivery.
        assert deadline_of(again) == promised
    finally:
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call


async def test_the_deadline_is_created_plus_the_timeout() -> None:
    created = datetime.now(UTC) - timedelta(seconds=100)
    pending = PendingCall(
        key="r1:t1:toolu_1",
        run_id="r1",
        task_id="t1",
        tool_call_id="toolu_1",
        tool_name="lookup",
        agent="a",
        input_json="{}",
        run_attempt=1,
        future=asyncio.get_running_loop().create_future(),
        deadline_s=120.0,
        created=created,
        delivery_attempt=3,
    )
    message = call_message(pending, "c3")
    assert deadline_of(pb.ToolServerMessage(call=message)) == created + timedelta(seconds=120)
    assert message.redelivery
