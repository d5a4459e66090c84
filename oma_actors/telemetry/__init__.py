"""Telemetry adapters over the progress event stream (optional extras).

Nothing here is imported by ``oma_actors`` itself, and ``oma_actors.telemetry.otel`` imports
OpenTelemetry only when a tracer is built, so a run without the ``otel`` extra never pays for it
(goal P6).
"""
