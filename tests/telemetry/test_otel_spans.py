"""OpenTelemetry spans from a scripted run and its restore (issue 14, item 4)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    OpenMultiAgent,
    Task,
    Team,
    TeamRunResult,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.events import ProgressEvent, TaskStarted, ToolCalled
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.telemetry.context import current_trace
from oma_actors.telemetry.otel import TraceRef, otel_progress, tee
from oma_actors.testing import ScriptedAdapter


def _answer(text: str) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(1, 1))


def _call(call_id: str) -> LLMResponse:
    return LLMResponse(
        [ToolUseBlock(call_id, "effect", {"label": "B"})],
        stop_reason="tool_use",
        usage=TokenUsage(1, 1),
    )


class _Args(BaseModel):
    label: str


def _team(log: list[str]) -> tuple[Team, ScriptedAdapter]:
    async def run(args: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(args, _Args)
        log.append(ctx.tool_call_id)
        return f"done:{args.label}"

    tool = define_tool(name="effect", description="", input_model=_Args, execute=run)
    adapter = ScriptedAdapter([_answer("first done"), _call("call-B"), _answer("second done")])
    agents = [AgentConfig("worker", adapter=adapter, tools=[tool])]
    return Team("t", agents, shared_memory_store=InMemoryStore()), adapter


def _tasks() -> list[Task]:
    return [
        Task("first", "do first", assignee="worker"),
        Task("second", "do second", assignee="worker", depends_on=["first"]),
    ]


def _tracing() -> tuple[InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


def _named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def _parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _span_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.span_id


def _committed(span: ReadableSpan) -> tuple[str, ...]:
    value = (span.attributes or {}).get("oma.checkpoint.committed", ())
    assert isinstance(value, tuple | list)
    return tuple(str(item) for item in value)


def test_importing_oma_actors_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, oma_actors, oma_actors.telemetry.otel; "
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_a_run_with_a_tool_makes_run_task_tool_and_checkpoint_spans() -> None:
    exporter, provider = _tracing()
    tracing = otel_progress(provider)
    seen: list[ProgressEvent] = []
    oma = OpenMultiAgent(on_progress=tee(seen.append, tracing))
    team, _ = _team([])
    with tracing.run(attempt=1) as ref:
        result = await oma.run_tasks(team, _tasks(), checkpoint=True)
    assert result.success
    spans = exporter.get_finished_spans()

    [run] = _named(spans, "oma.run")
    assert run.attributes is not None
    assert run.attributes["oma.run_id"] == result.run_id
    assert run.attributes["oma.attempt"] == 1
    assert f"{_span_id(run):016x}" == ref.span_id
    tasks = {s.attributes["oma.task_id"]: s for s in _named(spans, "oma.task") if s.attributes}
    assert set(tasks) == {t.task_id for t in seen if isinstance(t, TaskStarted)}
    assert len(tasks) == 2
    for task in tasks.values():
        assert _parent_id(task) == _span_id(run)
        assert task.attributes is not None
        assert task.attributes["oma.run_id"] == result.run_id
        assert task.attributes["oma.attempt"] == 1
    turns = [s.attributes["oma.turns"] for s in tasks.values() if s.attributes]
    assert sorted(turns) == [1, 2]  # type: ignore[type-var]

    [tool] = _named(spans, "oma.tool_call")
    assert tool.attributes is not None
    assert tool.attributes["oma.tool_call_id"] == "call-B"
    assert tool.attributes["oma.tool.replayed"] is False
    assert tool.attributes["oma.attempt"] == 1
    tool_task = tool.attributes["oma.task_id"]
    assert _parent_id(tool) == _span_id(tasks[tool_task])

    saves = _named(spans, "oma.checkpoint_save")
    assert saves
    commit = [s for s in saves if s.attributes and "call-B" in _committed(s)]
    assert commit, "the save that made call-B durable is a span"
    assert _parent_id(commit[0]) == _span_id(tasks[tool_task])
    for save in saves:
        assert save.attributes is not None
        assert save.attributes["oma.run_id"] == result.run_id
        assert _parent_id(save) in {_span_id(run), *map(_span_id, tasks.values())}


async def test_a_restored_run_carries_attempt_2_and_links_the_interrupted_trace() -> None:
    exporter, provider = _tracing()
    tracing = otel_progress(provider)
    log: list[str] = []
    team, _ = _team(log)
    holder: list[asyncio.Task[TeamRunResult]] = []

    def stop_after_tool(event: ProgressEvent) -> None:
        if isinstance(event, ToolCalled) and not event.replayed:
            holder[0].cancel()

    oma = OpenMultiAgent(on_progress=tee(tracing, stop_after_tool))
    first: list[TraceRef] = []

    async def interrupted_attempt() -> None:
        with tracing.run(attempt=1) as ref:
            first.append(ref)
            holder.append(asyncio.ensure_future(oma.run_tasks(team, _tasks(), checkpoint=True)))
            await holder[0]

    with pytest.raises(asyncio.CancelledError):
        await interrupted_attempt()
    [interrupted] = _named(exporter.get_finished_spans(), "oma.run")
    assert interrupted.status.status_code is StatusCode.ERROR
    exporter.clear()

    with tracing.run(attempt=2, continued_from=first[0]):
        result = await OpenMultiAgent(on_progress=tracing).restore(team)
    assert result.success
    assert log == ["call-B"]  # replayed, not re-run
    spans = exporter.get_finished_spans()
    [run] = _named(spans, "oma.run")
    assert run.attributes is not None
    assert run.attributes["oma.attempt"] == 2
    [link] = run.links
    assert f"{link.context.trace_id:032x}" == first[0].trace_id
    assert f"{link.context.span_id:016x}" == first[0].span_id
    assert link.attributes is not None
    assert link.attributes["oma.link"] == "continued_from"
    [tool] = _named(spans, "oma.tool_call")
    assert tool.attributes is not None
    assert tool.attributes["oma.tool.replayed"] is True
    assert tool.attributes["oma.attempt"] == 2
    [task] = [s for s in _named(spans, "oma.task") if _span_id(s) == _parent_id(tool)]
    assert _parent_id(task) == _span_id(run)
    assert {s.attributes["oma.attempt"] for s in spans if s.attributes and s.name != "oma.run"} == {
        2
    }


async def test_a_run_outside_a_block_gets_a_run_span_from_its_start_and_end_events() -> None:
    exporter, provider = _tracing()
    tracing = otel_progress(provider)
    team, _ = _team([])
    result = await OpenMultiAgent(on_progress=tracing).run_tasks(team, _tasks(), checkpoint=True)
    # RunStarted / RunFinished open and end it: no close() needed for a checkpointed run.
    spans = exporter.get_finished_spans()
    [run] = _named(spans, "oma.run")
    assert run.attributes is not None
    assert run.attributes["oma.run_id"] == result.run_id
    assert run.attributes["oma.attempt"] == 1
    assert run.attributes["oma.status"] == "ok"
    for task in _named(spans, "oma.task"):
        assert _parent_id(task) == _span_id(run)
    tracing.close()  # harmless: nothing is left open
    assert len(_named(exporter.get_finished_spans(), "oma.run")) == 1


def test_tee_hands_every_event_to_every_callback_even_after_one_raises() -> None:
    got: list[ProgressEvent] = []

    def broken(event: ProgressEvent) -> None:
        raise RuntimeError("observer bug")

    event = TaskStarted(run_id="r", task_id="t", title="x", agent="a")
    tee(broken, None, got.append)(event)
    assert got == [event]


async def test_an_unscoped_restore_links_to_the_interrupted_attempts_trace_by_itself() -> None:
    from oma_actors import CheckpointOptions
    from oma_actors.checkpoint import Checkpoint
    from oma_actors.events import RunStarted

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = otel_progress(provider)
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="otel-auto")
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter([_answer("one")]))])
    await OpenMultiAgent(on_progress=tracing).run_tasks(
        team, [Task("a", "x", assignee="w")], checkpoint=options
    )
    first = await Checkpoint(store, run_id="otel-auto").load_latest()
    assert first is not None
    assert first.identity is not None
    started: list[RunStarted] = []
    restored = OpenMultiAgent(on_progress=tee(tracing, lambda e: started.extend(
        [e] if isinstance(e, RunStarted) else []
    )))  # fmt: skip
    await restored.restore(team, checkpoint=options)
    tracing.close()
    runs = [span for span in exporter.get_finished_spans() if span.name == "oma.run"]
    assert [span.attributes["oma.attempt"] for span in runs] == [1, 2]  # type: ignore[index]
    [link] = runs[1].links
    assert f"{link.context.trace_id:032x}" == first.identity.trace_id
    assert f"{link.context.span_id:016x}" == first.identity.root_span_id
    assert started[0].continued_from_trace_id == first.identity.trace_id
    # The link names the exported attempt 1's trace, and the span its run span hangs under.
    assert f"{runs[0].context.trace_id:032x}" == first.identity.trace_id
    assert runs[0].parent is not None
    assert f"{runs[0].parent.span_id:016x}" == first.identity.root_span_id


async def test_a_scoped_run_s_snapshot_names_its_exported_run_span() -> None:
    """Inside ``tracing.run()`` the snapshot's identity is that span (SV-03: ``lastTraceId =
    traceId``), the one the journal's ``traceId`` names: a later unscoped restore's
    ``continued_from`` link then points at a span the backend received."""
    from oma_actors import CheckpointOptions
    from oma_actors.checkpoint import Checkpoint
    from oma_actors.journal import InMemoryRunJournal, JournalOptions

    exporter, provider = _tracing()
    tracing = otel_progress(provider)
    store, journal = InMemoryStore(), InMemoryRunJournal()
    options = CheckpointOptions(store=store, run_id="otel-scoped")
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter([_answer("one")]))])
    oma = OpenMultiAgent(on_progress=tracing, journal=JournalOptions(journal))
    with tracing.run(attempt=1) as ref:
        await oma.run_tasks(team, [Task("a", "x", assignee="w")], checkpoint=options)
    saved = await Checkpoint(store, run_id="otel-scoped").load_latest()
    assert saved is not None
    assert saved.identity is not None
    assert (saved.identity.trace_id, saved.identity.root_span_id) == (ref.trace_id, ref.span_id)
    assert {event.trace_id for event in await journal.read_from(0)} == {ref.trace_id}

    exporter.clear()
    await oma.restore(team, checkpoint=options)
    tracing.close()
    [restored] = _named(exporter.get_finished_spans(), "oma.run")
    [link] = restored.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (
        ref.trace_id, ref.span_id,
    )  # fmt: skip


async def test_one_application_span_around_a_run_and_its_restore_is_not_linked_to_itself() -> None:
    from opentelemetry import trace

    from oma_actors import CheckpointOptions
    from oma_actors.checkpoint import Checkpoint

    _, provider = _tracing()
    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="otel-app")
    adapter = ScriptedAdapter([_answer("one"), _answer("two")])
    team = Team("t", [AgentConfig("w", adapter=adapter)])
    tasks = [Task("a", "x", assignee="w"), Task("b", "y", assignee="w", depends_on=["a"])]
    with provider.get_tracer("app").start_as_current_span("app") as app:
        await OpenMultiAgent().run_tasks(team, tasks, checkpoint=options)
        first = await Checkpoint(store, run_id="otel-app").load_latest()
        await OpenMultiAgent().restore(team, checkpoint=options)
    second = await Checkpoint(store, run_id="otel-app").load_latest()
    assert first is not None
    assert first.identity is not None
    assert second is not None
    assert second.identity is not None
    assert first.identity.trace_id == f"{app.get_span_context().trace_id:032x}"
    assert second.identity.attempt == 2
    assert second.identity.trace_id != first.identity.trace_id  # fresh ids (ID-04)
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_each_model_call_is_a_turn_span_under_its_task() -> None:
    exporter, provider = _tracing()
    tracing = otel_progress(provider)
    team, _ = _team([])
    await OpenMultiAgent(on_progress=tracing).run_tasks(team, _tasks(), checkpoint=True)
    spans = exporter.get_finished_spans()
    turns = _named(spans, "oma.turn")
    tasks = {_span_id(task): task for task in _named(spans, "oma.task")}
    assert turns
    for turn in turns:
        assert _parent_id(turn) in tasks
        assert turn.attributes is not None
        assert turn.attributes["oma.turn"] >= 1  # type: ignore[operator]
        assert turn.start_time is not None
        assert turn.end_time is not None
        assert turn.end_time >= turn.start_time
    with_tools = [t for t in turns if t.attributes and t.attributes["oma.turn.tool_calls"]]
    assert with_tools  # the scripted model asks for a tool once


async def test_a_run_agent_call_outside_a_block_opens_no_run_span() -> None:
    # Its events carry no run id: they belong to no run, so no ``oma.run`` span is made up
    # for them (one keyed by ``None`` would gather every such call into one run).
    exporter, provider = _tracing()
    tracing = otel_progress(provider)
    agent = AgentConfig("solo", adapter=ScriptedAdapter([_answer("hi")]))
    await OpenMultiAgent(on_progress=tracing).run_agent(agent, "hello")
    tracing.close()
    assert _named(exporter.get_finished_spans(), "oma.run") == []


def test_without_opentelemetry_loaded_there_is_no_current_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "opentelemetry.trace")
    assert current_trace() is None
