"""The OpenTelemetry trace current in this context, for OMA's ``traceId``/``spanId`` (spec 17.2).

OMA stamps journal events with the trace and span of its trace runtime when one is active. Ours
is OpenTelemetry: tracing is on when a valid span is current (inside ``OtelProgress.run()``, or
any span the application opened around the run). OpenTelemetry is never imported from here: if
nothing imported it, no span can be current, and the answer is ``None`` at the cost of a dict
lookup (goal P6: ``import oma_actors`` does not load the optional extra).
"""

from __future__ import annotations

import sys


def current_trace() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` of the current span as lowercase hex, or ``None`` (tracing off)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
