"""Host-implemented tools: sessions, deliveries, redelivery and commit acknowledgements.

A host opens ``ToolHostService.Connect`` and registers tools with JSON schemas. When an agent
calls such a tool, :meth:`ToolHost.call` creates a pending call keyed by the idempotency key
``run_id:task_id:tool_call_id`` and delivers it to a session offering the tool. The first result
for the key wins; the runtime then saves it as the call's commit record, and only once a durable
save contains that record (:meth:`ToolHost.on_saved`, see ``sidecar.tool_acks``) is the host sent
``ResultAck.COMMITTED``. A run without checkpoints never saves one: its results are acknowledged
``NOT_DURABLE`` at once.

A session that ends with calls outstanding does not fail them: they wait for the next session
offering the tool (the same ``host_id`` first, for a short grace) and are delivered again with
the same key, a new ``call_id`` and ``redelivery = true``. A late result for an older delivery
still counts if it arrives first. A result over the input quota is not a disconnect: the host
ran the call, so it ends with an error result naming the size (:meth:`ToolHost.refuse_oversized`)
before the stream that carried it ends, and it is never delivered again.

Sessions and calls carry a tenant (``sidecar.tenancy``): a call is delivered only to a session
of its run's tenant, and a result for a call of another tenant is answered as for a call that
does not exist (``UNKNOWN_CALL``). Without principals every tenant is ``""``.

A call no session can take at once is announced through ``on_waiting`` (the run shows a
``tool_call_waiting`` event instead of silence), and a call that gets no result within its
timeout (the tool's own, else ``default_timeout_s``) through ``on_expired``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING

from oma_actors import ToolResult, define_tool
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.host_calls import (
    DEFAULT_MAX_CONCURRENT,
    HostSession,
    PendingCall,
    call_message,
    sort_registration,
)
from sidecar.record import NO_TENANT
from sidecar.schema import TooCostlyError, TooLargeError, check_off_loop, input_model, unchecked
from sidecar.status import InvalidArgument
from sidecar.tool_acks import CommitAcks

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pydantic import BaseModel

    from oma_actors import Tool, ToolContext
    from sidecar.schema import CompiledSchema

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 300.0
SAME_HOST_GRACE = 2.0
ANSWERED_MEMORY = 10_000
Ack = pb.ResultAck.Status


class ToolHost:
    """Every host session and every outstanding host tool call of the server."""

    def __init__(
        self,
        *,
        reserved: frozenset[str] = frozenset(),
        on_dispatch: Callable[[PendingCall, HostSession], None] | None = None,
        default_timeout_s: float = DEFAULT_TIMEOUT,
    ) -> None:
        if default_timeout_s <= 0:
            raise ValueError("a host call timeout must be positive")
        self.sessions: dict[str, HostSession] = {}
        self.on_dispatch = on_dispatch
        self.on_waiting: Callable[[PendingCall, str], None] | None = None
        self.on_expired: Callable[[PendingCall], None] | None = None
        self.default_timeout_s = default_timeout_s
        self._reserved = reserved
        self._models: dict[tuple[str, str], type[BaseModel]] = {}
        self._pending: dict[str, PendingCall] = {}
        self._deliveries: dict[str, str] = {}
        self._answered: OrderedDict[str, str] = OrderedDict()  # call id -> its tenant
        self._acks = CommitAcks(self._send)
        self._waiting: list[str] = []

    # -- sessions --------------------------------------------------------------------------

    def registered(self, name: str, *, tenant: str = NO_TENANT) -> pb.ToolDefinition | None:
        """The definition of ``name`` from a connected session of ``tenant``, if any."""
        for session in self.sessions.values():
            definition = session.tools.get(name)
            if definition is not None and session.tenant == tenant:
                return definition
        return None

    def open_session(
        self, register: pb.Register, *, tenant: str = NO_TENANT
    ) -> tuple[HostSession, pb.RegisterAck]:
        """Accept a Register message from a host of ``tenant``.

        Raises:
            InvalidArgument: no host id, or a bad ``max_concurrent_calls``.
        """
        accepted, rejected = sort_registration(register, self._reserved)
        session = HostSession(
            session_id=uuid.uuid4().hex,
            host_id=register.host_id,
            tools=accepted,
            max_concurrent=register.max_concurrent_calls or DEFAULT_MAX_CONCURRENT,
            tenant=tenant,
        )
        self.sessions[session.session_id] = session
        ack = pb.RegisterAck(session_id=session.session_id, accepted_tools=list(accepted))
        for name, reason in rejected.items():
            ack.rejected_tools[name] = reason
        self._pump()
        return session, ack

    def drain(self, session: HostSession) -> None:
        """The host asked for no new calls on ``session``."""
        session.draining = True

    def close_session(self, session: HostSession) -> None:
        """The stream ended: its outstanding calls wait for another session."""
        self.sessions.pop(session.session_id, None)
        loop = asyncio.get_running_loop()
        for call_id in session.in_flight:
            key = self._deliveries.get(call_id)
            pending = self._pending.get(key) if key is not None else None
            if pending is None or pending.call_id != call_id:
                continue
            pending.call_id = None
            pending.session_id = None
            pending.preferred_host = session.host_id
            pending.prefer_until = loop.time() + SAME_HOST_GRACE
            self._waiting.append(pending.key)
            self._announce_waiting(pending, f"the host {session.host_id!r} disconnected")
            loop.call_later(SAME_HOST_GRACE + 0.01, self._pump)
        session.in_flight.clear()
        self._acks.forget_session(session.session_id)
        self._pump()

    def _send(self, session_id: str, message: pb.ToolServerMessage) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.outbox.put_nowait(message)

    # -- calls -----------------------------------------------------------------------------

    def make_tool(
        self,
        definition: pb.ToolDefinition,
        *,
        run_attempt: int,
        durable: bool = True,
        tenant: str = NO_TENANT,
        redelivered: frozenset[str] | None = frozenset(),
    ) -> Tool:
        """An OMA tool whose calls are delivered to the hosts offering ``definition.name``.

        Args:
            definition: the tool as declared or registered.
            run_attempt: the attempt of the run the tool serves (told to the host).
            durable: whether the run saves checkpoints; without them no result is ever durable.
            tenant: the run's tenant: only its hosts get the calls.
            redelivered: idempotency keys of the calls an earlier attempt may have delivered
                (``sidecar.redelivery``); ``None``: unknown, so every call may have been.
        """
        schema = json.loads(definition.input_schema_json or '{"type": "object"}')
        timeout = (
            definition.timeout.seconds + definition.timeout.nanos / 1e9 or self.default_timeout_s
        )

        async def execute(args: BaseModel, ctx: ToolContext) -> ToolResult:
            data = args.model_dump(mode="json")
            pending = unchecked(args)
            if pending is not None:  # too costly to check on the event loop: check it here
                problem = await _off_loop_problem(definition.name, pending, data)
                if problem is not None:
                    return problem
            payload = json.dumps(data, separators=(",", ":"))
            return await self.call(
                ctx,
                definition.name,
                payload,
                run_attempt=run_attempt,
                limit_s=timeout,
                durable=durable,
                tenant=tenant,
                issued_before=redelivered is None or ctx.idempotency_key in redelivered,
            )

        # One model class per (name, schema): building a pydantic class per run is not free.
        cache_key = (definition.name, definition.input_schema_json)
        model = self._models.get(cache_key)
        if model is None:
            model = self._models[cache_key] = input_model(definition.name, schema)
        return define_tool(
            name=definition.name,
            description=definition.description or f"Host tool {definition.name}.",
            input_model=model,
            execute=execute,
            effect="unsafe" if definition.consequential else "idempotent",
            # OMA's flag too: it is part of a tool-call approval's content and hash (issue 13).
            consequential=definition.consequential,
        )

    async def call(
        self,
        ctx: ToolContext,
        tool_name: str,
        input_json: str,
        *,
        run_attempt: int,
        limit_s: float,
        durable: bool = True,
        tenant: str = NO_TENANT,
        issued_before: bool = False,
    ) -> ToolResult:
        """Deliver a call and wait for its first result (an error result on timeout).

        ``issued_before``: an earlier attempt of the run may have delivered this call, so
        every delivery is flagged ``redelivery``.
        """
        key = ctx.idempotency_key
        existing = self._pending.get(key)
        if existing is not None:  # the same call again while it is outstanding: join it
            return _tool_result(await asyncio.shield(existing.future))
        loop = asyncio.get_running_loop()
        pending = PendingCall(
            key=key,
            run_id=ctx.run_id or "",
            task_id=ctx.task_id or "",
            tool_call_id=ctx.tool_call_id,
            tool_name=tool_name,
            agent=ctx.agent_name,
            input_json=input_json,
            run_attempt=run_attempt,
            future=loop.create_future(),
            deadline_s=limit_s,
            durable=durable,
            tenant=tenant,
            issued_before=issued_before,
        )
        self._pending[key] = pending
        self._waiting.append(key)
        self._pump()
        if pending.call_id is None:
            self._announce_waiting(pending, self._why_waiting(tool_name, tenant))
        try:
            async with asyncio.timeout(limit_s):
                result = await asyncio.shield(pending.future)
        except TimeoutError:
            self._withdraw(pending, "deadline passed")
            if self.on_expired is not None:
                self.on_expired(pending)
            return ToolResult(
                f"Error: tool {tool_name!r} got no result from a tool host within {limit_s:g}s.",
                is_error=True,
            )
        except asyncio.CancelledError:
            self._withdraw(pending, "run cancelled")
            raise
        return _tool_result(result)

    def _why_waiting(self, tool_name: str, tenant: str) -> str:
        offering = [
            s for s in self.sessions.values() if tool_name in s.tools and s.tenant == tenant
        ]
        if not offering:
            return f"no connected host offers the tool {tool_name!r}"
        if all(s.draining for s in offering):
            return f"every host offering {tool_name!r} is draining"
        return f"every host offering {tool_name!r} is at its max_concurrent_calls"

    def _announce_waiting(self, pending: PendingCall, reason: str) -> None:
        if self.on_waiting is not None:
            self.on_waiting(pending, reason)

    def _withdraw(self, pending: PendingCall, reason: str) -> None:
        if self._pending.get(pending.key) is not pending:
            return
        del self._pending[pending.key]
        if pending.key in self._waiting:
            self._waiting.remove(pending.key)
        for call_id in pending.call_ids:
            self._deliveries.pop(call_id, None)
        session = self.sessions.get(pending.session_id or "")
        if session is not None and pending.call_id is not None:
            session.in_flight.discard(pending.call_id)
            cancel = pb.CancelToolCall(call_id=pending.call_id, reason=reason)
            session.outbox.put_nowait(pb.ToolServerMessage(cancel=cancel))
        if not pending.future.done():
            pending.future.cancel()
        self._pump()

    def _choose(self, pending: PendingCall, now_s: float) -> HostSession | None:
        candidates = [
            session
            for session in self.sessions.values()
            if not session.draining
            and session.tenant == pending.tenant
            and pending.tool_name in session.tools
            and len(session.in_flight) < session.max_concurrent
        ]
        same = [s for s in candidates if s.host_id == pending.preferred_host]
        if same:
            candidates = same
        elif pending.preferred_host is not None and now_s < pending.prefer_until:
            return None
        return min(candidates, key=lambda s: len(s.in_flight), default=None)

    def _pump(self) -> None:
        """Deliver every waiting call that a session can take now."""
        if not self._waiting:
            return
        now_s = asyncio.get_running_loop().time()
        still: list[str] = []
        for key in self._waiting:
            pending = self._pending.get(key)
            if pending is None or pending.call_id is not None:
                continue
            session = self._choose(pending, now_s)
            if session is None:
                still.append(key)
            else:
                self._deliver(pending, session)
        self._waiting = still

    def _deliver(self, pending: PendingCall, session: HostSession) -> None:
        call_id = uuid.uuid4().hex
        pending.delivery_attempt += 1
        pending.call_id = call_id
        pending.session_id = session.session_id
        pending.call_ids.append(call_id)
        self._deliveries[call_id] = pending.key
        session.in_flight.add(call_id)
        call = call_message(pending, call_id)
        session.outbox.put_nowait(pb.ToolServerMessage(call=call))
        if self.on_dispatch is not None:
            self.on_dispatch(pending, session)

    # -- results ---------------------------------------------------------------------------

    def submit(
        self,
        result: pb.ToolResult,
        *,
        session: HostSession | None,
        waiter: asyncio.Future[int] | None = None,
        tenant: str = NO_TENANT,
    ) -> int | None:
        """Take a result; returns the ack status now, or ``None`` when it waits for a save.

        The result comes from ``session``, else (the unary fallback) from a host of ``tenant``;
        for a call of another tenant it is ``UNKNOWN_CALL``, as for a call that never existed.

        Raises:
            InvalidArgument: the result has no call_id or no outcome.
        """
        if not result.call_id:
            raise InvalidArgument("result.call_id", "is required")
        if result.WhichOneof("outcome") is None:
            raise InvalidArgument("result.outcome", "success or error is required")
        if session is not None:
            tenant = session.tenant
        key = self._deliveries.get(result.call_id)
        if key is None:
            return (
                Ack.STATUS_DUPLICATE
                if self._answered.get(result.call_id) == tenant
                else Ack.STATUS_UNKNOWN_CALL
            )
        pending = self._outstanding(result, tenant)
        if pending is None:
            return Ack.STATUS_UNKNOWN_CALL
        if pending.durable:
            self._acks.expect(
                key,
                run_id=pending.run_id,
                call_id=result.call_id,
                session_id=session.session_id if session is not None else None,
                waiter=waiter,
            )
        self._settle(pending, result)
        return None if pending.durable else Ack.STATUS_NOT_DURABLE

    def refuse_oversized(
        self, result: pb.ToolResult, *, size: int, limit: int, tenant: str = NO_TENANT
    ) -> bool:
        """A host sent ``result`` (``size`` bytes on the wire), over the input quota ``limit``.

        The host ran the call and answered it, so the call must not be delivered again (the
        stream that carried the result ends with ``INPUT_TOO_LARGE``, and a session's end would
        otherwise redeliver its outstanding calls): it ends now with an error result naming the
        size, which the model sees. The oversized result itself is dropped, never stored. No
        ``ResultAck`` follows: the host was told by the error. Returns whether a call ended
        (``False``: no outstanding call of ``tenant`` had that delivery).
        """
        pending = self._outstanding(result, tenant)
        if pending is None:
            return False
        logger.warning(
            "host tool %r: refused a too large result for %s: %d bytes, over --max-input-bytes %d",
            pending.tool_name,
            pending.key,
            size,
            limit,
        )
        message = (
            f"Error: tool {pending.tool_name!r} returned a result of {size} bytes, over the "
            f"sidecar's limit of {limit} bytes (--max-input-bytes); the result was discarded."
        )
        refused = pb.ToolResult(call_id=result.call_id, error=pb.ToolError(message=message))
        self._settle(pending, refused)
        return True

    def _outstanding(self, result: pb.ToolResult, tenant: str) -> PendingCall | None:
        """The outstanding call ``result`` answers, if it is a delivery of one of ``tenant``."""
        key = self._deliveries.get(result.call_id)
        pending = self._pending.get(key) if key is not None else None
        if pending is None or pending.tenant != tenant:
            return None
        if result.tool_call_id and result.tool_call_id != pending.tool_call_id:
            return None
        return pending

    def _settle(self, pending: PendingCall, result: pb.ToolResult) -> None:
        """End ``pending`` with ``result``: no delivery of it counts or is made any more."""
        del self._pending[pending.key]
        for call_id in pending.call_ids:
            self._deliveries.pop(call_id, None)
            self._answered[call_id] = pending.tenant
        while len(self._answered) > ANSWERED_MEMORY:
            self._answered.popitem(last=False)
        holder = self.sessions.get(pending.session_id or "")
        if holder is not None and pending.call_id is not None:
            holder.in_flight.discard(pending.call_id)
        pending.future.set_result(result)
        self._pump()

    def on_saved(self, run_id: str | None, task_id: str | None, committed: Iterable[str]) -> None:
        """A durable save contains the commit records of ``committed``: acknowledge them."""
        self._acks.on_saved(run_id, task_id, committed)

    def forget_run(self, run_id: str) -> None:
        """The run ended: results still waiting for a durable save will never get one."""
        self._acks.forget_run(run_id)


async def _off_loop_problem(
    tool_name: str, compiled: CompiledSchema, data: object
) -> ToolResult | None:
    """The error result for the model if ``data`` fails its schema (checked in a thread)."""
    try:
        problems = await check_off_loop(compiled, data)
    except (TooCostlyError, TooLargeError) as exc:
        return ToolResult(f"Error: invalid input for tool {tool_name!r}: {exc}", is_error=True)
    if problems:
        listed = "; ".join(problems)
        return ToolResult(f"Error: invalid input for tool {tool_name!r}: {listed}", is_error=True)
    return None


def _tool_result(result: pb.ToolResult) -> ToolResult:
    if result.WhichOneof("outcome") == "error":
        return ToolResult(result.error.message or "Error: the tool failed.", is_error=True)
    return ToolResult(result.success.output_text)
