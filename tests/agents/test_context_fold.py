"""The fold's rule for ``context/replace`` and the checks around recording one.

A restore folds a ``context/replace`` into its entry only before a model call (phase
``awaiting_model``): elsewhere no strategy runs, so the event cannot be the runner's, and the
tail is refused (JR-16). Its layout rebuilds the conversation and the lineage; a summary's
usage is added. With ``enforce_lineage``, a rewrite that keeps a block without lineage is
refused before anything is recorded (JR-09). ``traceId``/``spanId`` must be strings.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from oma_actors import ContextStrategyError, TokenUsage
from oma_actors.agents.context import ContextRewrite, SlidingWindow
from oma_actors.agents.context_rules import sliding_window
from oma_actors.domain.inflight import PendingCall, RunnerState
from oma_actors.domain.jsonforms import block_to_json
from oma_actors.domain.messages import ToolResultBlock, ToolUseBlock
from oma_actors.domain.snapshot import InFlightTask
from oma_actors.journal import InMemoryRunJournal, JournalEvent
from oma_actors.journal.codec import parse_line
from oma_actors.journal.context_layout import layout_of
from oma_actors.journal.errors import JournalCorruptError, JournalLineageError
from oma_actors.journal.fold_rules import TailRejected, apply_event
from oma_actors.journal.recorder import JournalRecorder
from oma_actors.llm import Message, TextBlock
from oma_actors.orchestration.journal_context import check_rewrite_lineage


def conversation(turns: int) -> tuple[Message, ...]:
    out = [Message("user", [TextBlock("prompt")])]
    for i in range(turns):
        out += [
            Message("assistant", [ToolUseBlock(f"c{i}", "t", {})]),
            Message("user", [ToolResultBlock(f"c{i}", f"r{i}")]),
        ]
    return tuple(out)


def entry(state: RunnerState) -> InFlightTask:
    lineage = tuple(
        tuple((10 + m,) for _ in msg.content) for m, msg in enumerate(state.conversation)
    )
    return InFlightTask(
        task_id="a", assignee="w", state=state, journal_seq=30, conversation_lineage=lineage
    )


def replace_event(
    rewrite: ContextRewrite, seq: int = 40, usage: dict[str, int] | None = None
) -> JournalEvent:
    derived = [r.block for r in rewrite.replacements]
    detail: dict[str, object] = {"layout": layout_of(rewrite.before, rewrite.after, derived)}
    if usage is not None:
        detail["usage"] = usage
    return JournalEvent(
        seq=seq, type="context/replace", run_id="r", attempt=1, timestamp_unix_ms=1,
        task_id="a", agent_name="w",
        data={"strategy": rewrite.strategy,
              "replacements": [{"sourceEventSeqs": [11], "block": block_to_json(b)} for b in derived],
              "detail": detail},
    )  # fmt: skip


def test_the_fold_rebuilds_the_rewritten_conversation_and_its_lineage() -> None:
    before = conversation(3)
    rewrite = sliding_window(before, SlidingWindow(1))
    assert rewrite is not None
    state = RunnerState(phase="awaiting_model", conversation=before, token_usage=TokenUsage(3, 3))
    folded = apply_event(entry(state), replace_event(rewrite, usage={"input_tokens": 2, "output_tokens": 1}),
                         enforce_lineage=True)  # fmt: skip
    assert folded.state.conversation == rewrite.after
    assert folded.state.token_usage == TokenUsage(5, 4)
    assert folded.conversation_lineage is not None
    assert folded.conversation_lineage[0] == ((10,), (40,))  # the prompt, then the notice
    assert folded.conversation_lineage[1:] == (((15,),), ((16,),))


def test_a_replace_while_tools_run_is_refused() -> None:
    before = conversation(3)
    rewrite = sliding_window(before, SlidingWindow(1))
    assert rewrite is not None
    call = ToolUseBlock("c9", "t", {})
    state = RunnerState(
        phase="executing_tools",
        conversation=(*before, Message("assistant", [call])),
        pending=(PendingCall(call=call),),
    )
    with pytest.raises(TailRejected, match="only before a model call"):
        apply_event(entry(state), replace_event(rewrite), enforce_lineage=False)


def test_a_replace_without_a_layout_is_refused() -> None:
    """OMA's own events carry no layout: the fold cannot rebuild what the model saw."""
    before = conversation(3)
    rewrite = sliding_window(before, SlidingWindow(1))
    assert rewrite is not None
    event = replace_event(rewrite)
    event = replace(event, data={**event.data, "detail": {"droppedTurns": 2}})
    state = RunnerState(phase="awaiting_model", conversation=before)
    with pytest.raises(TailRejected, match="malformed"):
        apply_event(entry(state), event, enforce_lineage=False)


def test_layout_of_refuses_a_block_from_nowhere() -> None:
    before = conversation(1)
    stray = (Message("user", [TextBlock("from nowhere")]),)
    with pytest.raises(ValueError, match="neither a block of the conversation"):
        layout_of(before, stray, [])


async def test_enforce_lineage_refuses_a_rewrite_that_keeps_a_block_without_lineage() -> None:
    recorder = await JournalRecorder.open(
        InMemoryRunJournal(), run_id="r", attempt=1, enforce_lineage=True
    )
    before = conversation(3)
    rewrite = sliding_window(before, SlidingWindow(1))
    assert rewrite is not None
    for message in before[:-1]:
        recorder.register_blocks(message.content, [1])
    with pytest.raises(JournalLineageError):
        check_rewrite_lineage(recorder, rewrite)  # the last message's block has none
    recorder.register_blocks(before[-1].content, [2])
    check_rewrite_lineage(recorder, rewrite)  # the notice is the rewrite's own: no lineage yet


@pytest.mark.parametrize("field", ["traceId", "spanId"])
def test_trace_fields_must_be_strings(field: str) -> None:
    line = f'{{"type":"turn/start","seq":1,"timestampUnixMs":1,"runId":"r","attempt":1,"{field}":7,"turn":1}}'
    with pytest.raises(JournalCorruptError, match=field):
        parse_line(line)


def test_context_strategy_error_is_a_configuration_error() -> None:
    from oma_actors import ConfigurationError

    assert issubclass(ContextStrategyError, ConfigurationError)
