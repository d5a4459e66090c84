"""The JSONL line format: OMA's bytes, strict reading, and JavaScript number layout."""

from __future__ import annotations

import hashlib

import pytest

from oma_actors.domain.messages import Message, TextBlock, TokenUsage, ToolResultBlock, ToolUseBlock
from oma_actors.journal import JournalCorruptError, JournalEvent, parse_line, to_json_line
from oma_actors.journal import vocabulary as v
from oma_actors.journal.jsjson import js_dumps, js_number


def _stamp(draft: v.EventDraft, seq: int) -> JournalEvent:
    return JournalEvent(
        seq=seq,
        type=draft.type,
        run_id="run-1",
        attempt=1,
        timestamp_unix_ms=1_700_000_000_000 + seq,
        task_id=draft.task_id,
        agent_name=draft.agent_name,
        source_event_seqs=draft.source_event_seqs,
        data=draft.data,
    )


# Golden lines. Key order: OMA's ``JournalRecorder.emit`` (packages/core/src/journal/journal.ts)
# stamps ``{...draft, seq, timestampUnixMs, runId, attempt, ...(traceId)}``, and its emitters'
# drafts are ``{type, ...scope, <payload>, ...(sourceEventSeqs)}`` (agent/runner.ts; the
# runner's scope: taskId, agentName, spanId); variant fields in the order of docs/run-journal.md
# "Event vocabulary"'s payload column; blocks in Anthropic's shape (tests/verify.test.ts
# fixture: {type:'tool_use', id, name, input}, {type:'tool_result', tool_use_id, content}).
GOLDEN = [
    (
        v.turn_started(turn=1),
        '{"type":"turn/start","turn":1,"seq":1,"timestampUnixMs":1700000000001,"runId":"run-1",'
        '"attempt":1}',
    ),
    (
        v.assistant_message(
            message=Message("assistant", [TextBlock("I will inspect the logs")]),
            usage=TokenUsage(2, 3),
            model="mock-model",
            stop_reason="tool_use",
            task_id="task-1",
            agent_name="investigator",
            source_event_seqs=[1],
        ),
        '{"type":"assistant/message","taskId":"task-1","agentName":"investigator",'
        '"message":{"role":"assistant","content":[{"type":"text","text":"I will inspect the logs"}]},'
        '"origin":"response","usage":{"input_tokens":2,"output_tokens":3},"model":"mock-model",'
        '"stopReason":"tool_use","sourceEventSeqs":[1],"seq":2,"timestampUnixMs":1700000000002,'
        '"runId":"run-1","attempt":1}',
    ),
    (
        v.tool_call(call=ToolUseBlock("call-logs", "logs", {}), source_event_seqs=[2]),
        '{"type":"tool/call","call":{"type":"tool_use","id":"call-logs","name":"logs","input":{}},'
        '"sourceEventSeqs":[2],"seq":3,"timestampUnixMs":1700000000003,"runId":"run-1","attempt":1}',
    ),
    (
        v.tool_result(result=ToolResultBlock("call-logs", "ok"), source_event_seqs=[3]),
        '{"type":"tool/result","toolCallId":"call-logs",'
        '"result":{"type":"tool_result","tool_use_id":"call-logs","content":"ok"},'
        '"sourceEventSeqs":[3],"seq":4,"timestampUnixMs":1700000000004,"runId":"run-1","attempt":1}',
    ),
    (
        v.checkpoint_saved(mode="file", version=5, watermark_seq=4),
        '{"type":"checkpoint/saved","mode":"file","version":5,"watermarkSeq":4,"seq":5,'
        '"timestampUnixMs":1700000000005,"runId":"run-1","attempt":1}',
    ),
    (
        v.run_ended(status="error", error="1 task(s) failed"),
        '{"type":"run/end","status":{"code":"error"},"error":{"message":"1 task(s) failed"},'
        '"seq":6,"timestampUnixMs":1700000000006,"runId":"run-1","attempt":1}',
    ),
]


@pytest.mark.parametrize(("draft", "line"), GOLDEN, ids=[d.type for d, _ in GOLDEN])
def test_lines_are_omas_bytes_and_read_back(draft: v.EventDraft, line: str) -> None:
    seq = GOLDEN.index((draft, line)) + 1
    event = _stamp(draft, seq)
    assert to_json_line(event) == line
    assert parse_line(line) == event
    assert to_json_line(parse_line(line)) == line


def test_optional_variant_fields_are_left_out_not_null() -> None:
    line = to_json_line(_stamp(v.run_started(mode="runTasks"), 1))
    assert line.startswith('{"type":"run/start","mode":"runTasks","seq":1,')
    assert "null" not in line


def test_request_block_descriptor_keeps_null_lineage() -> None:
    block = v.request_block(
        message_index=0, block_index=1, role="user", block=TextBlock("hi"), source_event_seqs=None
    )
    assert list(block) == [
        "messageIndex", "blockIndex", "role", "blockType", "sourceEventSeqs", "contentHash",
    ]  # fmt: skip
    assert block["sourceEventSeqs"] is None
    line = to_json_line(_stamp(v.llm_request(turn=1, model="m", blocks=[block]), 1))
    assert '"sourceEventSeqs":null,' in line


def test_content_hash_is_sha256_of_sorted_key_json() -> None:
    # Keys sorted, as canonical JSON requires (JR-07).
    expected = hashlib.sha256(b'{"text":"hi","type":"text"}').hexdigest()
    assert v.canonical_content_hash(TextBlock("hi")) == expected
    assert v.canonical_content_hash({"type": "text", "text": "hi"}) == expected


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1.0, "1"),
        (1.5, "1.5"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (-0.0, "0"),
        (123456789.125, "123456789.125"),
        (-70.5, "-70.5"),
        (-1e21, "-1e+21"),
        (-1e-7, "-1e-7"),
        (float("nan"), "null"),
        (float("inf"), "null"),
    ],
)
def test_numbers_are_laid_out_as_javascript_does(number: float, text: str) -> None:
    assert js_number(number) == text


def test_a_negative_float_in_an_event_keeps_its_sign() -> None:
    # A float leaves orjson's path for the reference writer, which lays numbers out itself.
    assert js_dumps({"amount": -70.5, "n": [-1e21]}) == '{"amount":-70.5,"n":[-1e+21]}'


@pytest.mark.parametrize("sort_keys", [False, True])
def test_an_object_key_that_is_no_string_is_a_type_error_naming_it(sort_keys: bool) -> None:
    with pytest.raises(TypeError, match="object key 1 is not a string"):
        js_dumps({"a": 1.5, 1: "x"}, sort_keys=sort_keys)


def test_strings_escape_as_json_stringify() -> None:
    assert (
        js_dumps({"a": "é\u2028\n\x01\ud800", "b": [True, None, 2**60]})
        == (
            '{"a":"é\u2028\\n\\u0001\\ud800","b":[true,null,1152921504606847000]}'  # JavaScript's String(2 ** 60)
        )
    )


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("not json", "json"),
        ("[1]", "json"),
        ('{"type":"turn/start","seq":0,"timestampUnixMs":1,"runId":"r","attempt":1}', "seq"),
        ('{"type":"turn/start","seq":1.5,"timestampUnixMs":1,"runId":"r","attempt":1}', "seq"),
        ('{"type":"not/a/type","seq":1,"timestampUnixMs":1,"runId":"r","attempt":1}', "type"),
        ('{"type":"turn/start","seq":1,"timestampUnixMs":"x","runId":"r","attempt":1}',
         "timestampUnixMs"),
        ('{"type":"turn/start","seq":1,"timestampUnixMs":1,"runId":7,"attempt":1}', "runId"),
        ('{"type":"turn/start","seq":1,"timestampUnixMs":1,"runId":"r","attempt":0}', "attempt"),
        ('{"type":"turn/start","seq":1,"timestampUnixMs":1,"runId":"r","attempt":1,"taskId":3}',
         "taskId"),
        ('{"type":"turn/start","seq":2,"timestampUnixMs":1,"runId":"r","attempt":1,'
         '"sourceEventSeqs":["1"]}', "sourceEventSeqs"),
        ('{"type":"turn/start","seq":true,"timestampUnixMs":1,"runId":"r","attempt":1}', "seq"),
        ('{"type":"turn/start","seq":1,"timestampUnixMs":NaN,"runId":"r","attempt":1}', "json"),
    ],
)  # fmt: skip
def test_a_bad_line_names_its_line_and_field(line: str, field: str) -> None:
    with pytest.raises(JournalCorruptError) as caught:
        parse_line(line, line=7, path="run.jsonl")
    assert (caught.value.line, caught.value.field) == (7, field)
    assert "line 7" in str(caught.value)


def test_unknown_variant_fields_survive_a_round_trip() -> None:
    line = (
        '{"type":"turn/start","spanId":"s","turn":1,"seq":1,"timestampUnixMs":1,"runId":"r",'
        '"attempt":1,"traceId":"t"}'
    )
    event = parse_line(line)
    # traceId/spanId are base fields (telemetry/context.py); the rest is the variant's.
    assert (event.trace_id, event.span_id) == ("t", "s")
    assert event.data == {"turn": 1}
    assert to_json_line(event) == line


def test_data_cannot_shadow_a_base_field() -> None:
    forged = JournalEvent(
        seq=1, type="turn/start", run_id="r", attempt=1, timestamp_unix_ms=1, data={"seq": 9}
    )
    with pytest.raises(ValueError, match="base field"):
        to_json_line(forged)


def _emitted(draft: v.EventDraft, *, trace: tuple[str, str] | None = None) -> JournalEvent:
    return JournalEvent(
        seq=7,
        type=draft.type,
        run_id="run-tasks",
        attempt=1,
        timestamp_unix_ms=1,
        task_id=draft.task_id,
        agent_name=draft.agent_name,
        trace_id=None if trace is None else trace[0],
        span_id=None if trace is None else trace[1],
        source_event_seqs=draft.source_event_seqs,
        data=draft.data,
    )


STAMPED = '"seq":7,"timestampUnixMs":1,"runId":"run-tasks","attempt":1'

# OMA's key order, one event of each shape. ``JournalRecorder.emit`` (packages/core/src/journal/
# journal.ts) builds ``{...draft, seq, timestampUnixMs, runId, attempt, ...(traceId)}`` and the
# JSONL journal writes ``JSON.stringify`` of it. The runner's drafts (agent/runner.ts) are
# ``{type, ...journalScope (taskId, agentName, spanId), <payload>, ...(sourceEventSeqs)}``; the
# orchestrator's are ``{type, <fields>}`` (task/status: taskId, agentName, status, reason;
# memory/set: taskId, agentName, agent, key, valueBytes; approval/request: taskId, agentName,
# request). So the recorder's fields come last, ``traceId`` after them.
OMA_ORDER = [
    pytest.param(
        _emitted(v.turn_started(turn=1, task_id="t-pay", agent_name="worker")),
        '{"type":"turn/start","taskId":"t-pay","agentName":"worker","turn":1,' + STAMPED + "}",
        id="runner-scoped",
    ),
    pytest.param(
        _emitted(
            v.tool_call(
                call=ToolUseBlock("call-1", "pay", {"amount": 5}),
                task_id="t-pay",
                agent_name="worker",
                source_event_seqs=[5],
            )
        ),
        '{"type":"tool/call","taskId":"t-pay","agentName":"worker",'
        '"call":{"type":"tool_use","id":"call-1","name":"pay","input":{"amount":5}},'
        '"sourceEventSeqs":[5],' + STAMPED + "}",
        id="runner-scoped-with-lineage",
    ),
    pytest.param(
        _emitted(
            v.task_status(task_id="t-pay", agent_name="worker", status="failed", reason="boom")
        ),
        '{"type":"task/status","taskId":"t-pay","agentName":"worker","status":"failed",'
        '"reason":"boom",' + STAMPED + "}",
        id="orchestrator-task-status",
    ),
    pytest.param(
        _emitted(
            v.memory_set(
                agent="worker", key="t-pay", value_bytes=3, task_id="t-pay", agent_name="worker"
            )
        ),
        '{"type":"memory/set","taskId":"t-pay","agentName":"worker","agent":"worker",'
        '"key":"t-pay","valueBytes":3,' + STAMPED + "}",
        id="orchestrator-memory-set",
    ),
    pytest.param(
        _emitted(v.run_started(mode="runTasks")),
        '{"type":"run/start","mode":"runTasks",' + STAMPED + "}",
        id="orchestrator-unscoped",
    ),
    pytest.param(
        _emitted(
            v.tool_result(
                result=ToolResultBlock("call-1", "ok"),
                task_id="t-pay",
                agent_name="worker",
                source_event_seqs=[8],
            ),
            trace=("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"),
        ),
        '{"type":"tool/result","taskId":"t-pay","agentName":"worker","spanId":"b7ad6b7169203331",'
        '"toolCallId":"call-1","result":{"type":"tool_result","tool_use_id":"call-1",'
        '"content":"ok"},"sourceEventSeqs":[8],' + STAMPED + ',"traceId":'
        '"0af7651916cd43dd8448eb211c80319c"}',
        id="traced",
    ),
]


@pytest.mark.parametrize(("event", "line"), OMA_ORDER)
def test_a_line_has_omas_key_order(event: JournalEvent, line: str) -> None:
    assert to_json_line(event) == line
    assert parse_line(line) == event


def test_a_line_in_the_layout_earlier_versions_wrote_reads_as_the_same_event() -> None:
    # Base fields first, as journals written before OMA's key order have them.
    old = (
        '{"type":"tool/result","seq":7,"timestampUnixMs":1,"runId":"run-tasks","attempt":1,'
        '"taskId":"t-pay","agentName":"worker","traceId":"0af7651916cd43dd8448eb211c80319c",'
        '"spanId":"b7ad6b7169203331","sourceEventSeqs":[8],"toolCallId":"call-1",'
        '"result":{"type":"tool_result","tool_use_id":"call-1","content":"ok"}}'
    )
    event, line = OMA_ORDER[-1].values
    assert parse_line(old) == event
    assert to_json_line(parse_line(old)) == line
