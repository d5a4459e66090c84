"""OpenTelemetry spans from the progress event stream (the optional extra ``otel``).

``otel_progress()`` returns an ``on_progress`` callback that turns a run's events into spans::

    tracing = otel_progress()  # the global tracer provider unless one is given
    oma = OpenMultiAgent(on_progress=tee(print_event, tracing))
    with tracing.run(attempt=2, continued_from=previous) as this_attempt:
        await oma.restore(team)

Spans: ``oma.run`` (the ``run()`` block, or from a run's first event to ``close()``), one
``oma.task`` per task under it, and under the task ``oma.tool_call`` and ``oma.checkpoint_save``.
Attributes: ``oma.run_id``, ``oma.attempt`` (when known), ``oma.task_id``, ``oma.tool_call_id``.

The events report a tool call or a save when it has finished, not when it began, so those two
spans are instants at their completion. Turns are not events, so there are no turn spans; a
task span carries its ``oma.turns`` and token usage. OpenTelemetry is imported when the first
``OtelProgress`` is built, never by ``import oma_actors`` (goal P6).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oma_actors.events import (
    CheckpointSaved,
    CheckpointSaveFailed,
    LeaseLost,
    ProgressEvent,
    RunFinished,
    RunStarted,
    TaskCompleted,
    TaskFailed,
    TaskRetry,
    TaskSkipped,
    TaskStarted,
    ToolCalled,
    ToolOutcomeUnknown,
    TurnCompleted,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from opentelemetry.trace import Link, Span, SpanContext, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

logger = logging.getLogger(__name__)

_INSTRUMENTATION = "oma_actors"
Attributes = dict[str, "AttributeValue"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceRef:
    """A span's place in a trace, as lowercase hex (W3C trace context).

    Build one from a snapshot's ``RunIdentity`` (``trace_id``, ``root_span_id``) or keep the one
    ``OtelProgress.run`` yields, to link a later attempt to it (``continued_from``).
    """

    trace_id: str
    span_id: str


@dataclass(slots=True, kw_only=True)
class _Run:
    """The open spans of one run attempt."""

    span: Span
    run_id: str | None
    attempt: int | None
    tasks: dict[str, Span] = field(default_factory=dict)

    def base(self) -> Attributes:
        attrs: Attributes = {}
        if self.run_id is not None:
            attrs["oma.run_id"] = self.run_id
        if self.attempt is not None:
            attrs["oma.attempt"] = self.attempt
        return attrs


class OtelProgress:
    """An ``on_progress`` callback that records a run's events as OpenTelemetry spans.

    Args:
        tracer_provider: where spans go; the global provider when ``None``.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        from opentelemetry import trace  # lazy: the extra is optional (goal P6)

        self._tracer: Tracer = trace.get_tracer(_INSTRUMENTATION, tracer_provider=tracer_provider)
        self._active: ContextVar[_Run | None] = ContextVar("oma_otel_run", default=None)
        self._unscoped: dict[str, _Run] = {}

    @contextmanager
    def run(
        self, *, attempt: int | None = None, continued_from: TraceRef | None = None
    ) -> Iterator[TraceRef]:
        """Scope one run attempt: its events go under one ``oma.run`` span that ends on exit.

        The span is the current OpenTelemetry span inside the block, so spans a tool or model
        makes nest under the run. Concurrent blocks stay apart (context variables).

        Args:
            attempt: the attempt number (``oma.attempt``); a restore's is the stored one + 1.
            continued_from: the interrupted attempt's run span, linked from this one.

        Yields:
            This run span's ``TraceRef``, to persist for the next attempt's ``continued_from``.
        """
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        links = [] if continued_from is None else [_link(continued_from)]
        run = self._start_run(run_id=None, attempt=attempt, links=links)
        token = self._active.set(run)
        try:
            with trace.use_span(run.span, end_on_exit=False):
                yield _ref(run.span)
        except BaseException as exc:
            run.span.record_exception(exc)
            run.span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            self._active.reset(token)
            _end_all(run)

    def close(self) -> None:
        """End the spans of runs seen outside a ``run()`` block, and any task left open."""
        for run in self._unscoped.values():
            _end_all(run)
        self._unscoped.clear()

    def __call__(self, event: ProgressEvent) -> None:
        """Record one event (the ``on_progress`` signature)."""
        if isinstance(event, RunStarted | RunFinished) and self._run_edge(event):
            return
        run = self._run_for(event.run_id)
        match event:
            case TaskStarted(task_id=task_id, agent=agent, title=title):
                if run is not None and task_id not in run.tasks:
                    attrs = run.base() | {"oma.task_id": task_id, "oma.agent": agent}
                    run.tasks[task_id] = self._child(
                        run.span, "oma.task", attrs | {"oma.title": title}
                    )
            case TaskCompleted(task_id=task_id, result=result):
                span = _pop_task(run, task_id)
                if span is not None:
                    usage = result.token_usage
                    span.set_attributes(
                        {
                            "oma.turns": result.turns,
                            "oma.tokens.input": usage.input_tokens,
                            "oma.tokens.output": usage.output_tokens,
                        }
                    )
                    span.end()
            case TaskFailed(task_id=task_id, error=error):
                span = _pop_task(run, task_id)
                if span is not None:
                    _fail(span, error)
                    span.end()
            case TaskSkipped(task_id=task_id, reason=reason):
                if run is not None:
                    attrs = run.base() | {"oma.task_id": task_id, "oma.task.skipped": reason}
                    self._child(run.span, "oma.task", attrs).end()
            case TaskRetry(task_id=task_id, attempt=attempt, error=error):
                span = run.tasks.get(task_id) if run is not None else None
                if span is not None:
                    span.add_event("oma.task.retry", {"oma.task.try": attempt, "error": error})
            case ToolCalled():
                self._instant(run, event.task_id, "oma.tool_call", _tool_attrs(event), None)
            case TurnCompleted(task_id=task_id, duration_ms=duration_ms):
                turn: Attributes = {
                    "oma.turn": event.turn,
                    "oma.agent": event.agent,
                    "oma.tokens.input": event.input_tokens,
                    "oma.tokens.output": event.output_tokens,
                    "oma.turn.tool_calls": event.tool_calls,
                }
                self._instant(run, task_id, "oma.turn", turn, None, duration_ms=duration_ms)
            case ToolOutcomeUnknown(task_id=task_id, tool_call_id=call_id):
                unknown = {"oma.tool_call_id": call_id, "oma.tool.outcome": "unknown"}
                self._instant(run, task_id, "oma.tool_call", dict(unknown), None)
            case CheckpointSaved(task_id=task_id):
                self._instant(run, task_id, "oma.checkpoint_save", _save_attrs(event), None)
            case CheckpointSaveFailed(error=error):
                attrs = {"oma.checkpoint.strict": event.strict}
                if event.boundary is not None:
                    attrs["oma.checkpoint.boundary"] = event.boundary
                self._instant(run, None, "oma.checkpoint_save", attrs, error)
            case LeaseLost(reason=reason):
                if run is not None:
                    run.span.add_event("oma.lease_lost", {"reason": reason})
                    _fail(run.span, f"lease lost: {reason}")
            case _:
                if run is not None:
                    run.span.add_event(f"oma.{type(event).__name__}")

    def _run_edge(self, event: RunStarted | RunFinished) -> bool:
        """Open or end an unscoped run's span at the runtime's own start and end events.

        A run started outside a ``run()`` block gets its span here, with its attempt and a
        ``continued_from`` link to the interrupted attempt's trace (from the snapshot's
        identity), and ends when its task work ends. Inside a block the block decides.
        """
        run_id = event.run_id
        active = self._active.get()
        if run_id is None or (active is not None and active.run_id in (None, run_id)):
            if active is not None and isinstance(event, RunStarted):
                active.attempt = event.attempt
                active.span.set_attribute("oma.attempt", event.attempt)
            return False
        if isinstance(event, RunStarted):
            previous = self._unscoped.pop(run_id, None)
            if previous is not None:
                _end_all(previous)
            links = []
            if event.continued_from_trace_id and event.continued_from_span_id:
                ref = TraceRef(
                    trace_id=event.continued_from_trace_id, span_id=event.continued_from_span_id
                )
                links.append(_link(ref))
            # Under the attempt's identity (the snapshot's ``lastTraceId``/``lastRootSpanId``):
            # the span the application had current when the run began, or, with none, a root
            # of the identity's random ids. So the run span is in the trace a later attempt's
            # ``continued_from`` link names, as a child of the very span it names.
            root = TraceRef(trace_id=event.trace_id, span_id=event.root_span_id)
            run = self._start_run(run_id=run_id, attempt=event.attempt, links=links, parent=root)
            run.span.set_attribute("oma.trace_id", event.trace_id)
            self._unscoped[run_id] = run
            return True
        finished = self._unscoped.pop(run_id, None)
        if finished is not None:
            finished.span.set_attribute("oma.status", event.status)
            if event.status not in ("ok", "suspended"):
                _fail(finished.span, event.message or event.status)
            _end_all(finished)
        return True

    def _run_for(self, run_id: str | None) -> _Run | None:
        """The run an event belongs to: the ``run()`` block's, else one opened on first sight."""
        active = self._active.get()
        if active is not None and run_id is not None and active.run_id in (None, run_id):
            if active.run_id is None:
                active.run_id = run_id
                active.span.set_attribute("oma.run_id", run_id)
            return active
        if run_id is None:
            return active
        run = self._unscoped.get(run_id)
        if run is None:
            run = self._unscoped[run_id] = self._start_run(run_id=run_id, attempt=None, links=[])
        return run

    def _start_run(
        self,
        *,
        run_id: str | None,
        attempt: int | None,
        links: list[Link],
        parent: TraceRef | None = None,
    ) -> _Run:
        from opentelemetry import trace

        attrs: Attributes = {} if run_id is None else {"oma.run_id": run_id}
        if attempt is not None:
            attrs["oma.attempt"] = attempt
        context = None if parent is None else trace.set_span_in_context(_remote(parent))
        span = self._tracer.start_span("oma.run", context=context, attributes=attrs, links=links)
        return _Run(span=span, run_id=run_id, attempt=attempt)

    def _child(
        self, parent: Span, name: str, attrs: Attributes, *, start_time: int | None = None
    ) -> Span:
        from opentelemetry import trace

        return self._tracer.start_span(
            name, context=trace.set_span_in_context(parent), attributes=attrs, start_time=start_time
        )

    def _instant(
        self,
        run: _Run | None,
        task_id: str | None,
        name: str,
        attrs: Attributes,
        error: str | None,
        *,
        duration_ms: float = 0.0,
    ) -> None:
        """A span for a finished step: a moment, or the ``duration_ms`` that ended now."""
        parent = None
        if run is not None:
            parent = run.tasks.get(task_id, run.span) if task_id is not None else run.span
            attrs = run.base() | attrs
        if task_id is not None:
            attrs = attrs | {"oma.task_id": task_id}
        now = time.time_ns()
        start = now - int(duration_ms * 1_000_000)
        if parent is None:
            span = self._tracer.start_span(name, attributes=attrs, start_time=start)
        else:
            span = self._child(parent, name, attrs, start_time=start)
        if error is not None:
            _fail(span, error)
        span.end(end_time=now)


def otel_progress(tracer_provider: TracerProvider | None = None) -> OtelProgress:
    """An ``on_progress`` callback recording spans (see the module docstring)."""
    return OtelProgress(tracer_provider)


def tee(*callbacks: Callable[[ProgressEvent], None] | None) -> Callable[[ProgressEvent], None]:
    """One ``on_progress`` that hands each event to every callback, in order.

    A callback that raises is logged and the others still get the event.
    """
    chosen = [callback for callback in callbacks if callback is not None]

    def each(event: ProgressEvent) -> None:
        for callback in chosen:
            try:
                callback(event)
            except Exception:  # one broken observer must not starve the others
                logger.exception("on_progress callback raised for %s", type(event).__name__)

    return each


def _tool_attrs(event: ToolCalled) -> Attributes:
    return {
        "oma.tool_call_id": event.tool_call_id,
        "oma.tool.name": event.tool_name,
        "oma.tool.replayed": event.replayed,
        "oma.tool.is_error": event.is_error,
        "oma.agent": event.agent,
    }


def _save_attrs(event: CheckpointSaved) -> Attributes:
    attrs: Attributes = {"oma.checkpoint.revision": event.revision}
    if event.boundary is not None:
        attrs["oma.checkpoint.boundary"] = event.boundary
    if event.committed:
        attrs["oma.checkpoint.committed"] = list(event.committed)
    return attrs


def _pop_task(run: _Run | None, task_id: str) -> Span | None:
    return run.tasks.pop(task_id, None) if run is not None else None


def _fail(span: Span, message: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, message))


def _end_all(run: _Run) -> None:
    for span in run.tasks.values():
        span.end()
    run.tasks.clear()
    run.span.end()


def _ref(span: Span) -> TraceRef:
    ctx = span.get_span_context()
    return TraceRef(trace_id=f"{ctx.trace_id:032x}", span_id=f"{ctx.span_id:016x}")


def _context(ref: TraceRef) -> SpanContext:
    from opentelemetry.trace import SpanContext, TraceFlags

    return SpanContext(
        trace_id=int(ref.trace_id, 16),
        span_id=int(ref.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def _remote(ref: TraceRef) -> Span:
    from opentelemetry.trace import NonRecordingSpan

    return NonRecordingSpan(_context(ref))


def _link(ref: TraceRef) -> Link:
    from opentelemetry.trace import Link

    return Link(_context(ref), {"oma.link": "continued_from"})
