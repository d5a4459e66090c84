"""The base-field checks of a journal line: the one-test fast path judges as the full checks.

``codec._event_of`` tests a line as the recorder writes it with exact types at once and leaves
anything else to the field-by-field checks. ``reference`` below is those checks as they were
written before the fast path (``from_json_object``'s, in its order): every object here gets the
same event or the same error from both.
"""

from __future__ import annotations

from typing import Any

import pytest

from oma_actors.journal.codec import EVENT_TYPES, from_json_object, parse_line_bytes
from oma_actors.journal.errors import JournalCorruptError
from oma_actors.journal.event import JournalEvent

_ABSENT: Any = object()


def reference(raw: dict[str, Any]) -> JournalEvent:
    """The checks one by one, as ``_event_of`` made them before its fast path."""
    raw = dict(raw)
    seq = raw.pop("seq", None)
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise JournalCorruptError("p", 3, "seq", f"must be a positive integer, got {seq!r}")
    kind = raw.pop("type", None)
    if kind not in EVENT_TYPES:
        raise JournalCorruptError("p", 3, "type", f"unknown event type {kind!r}")
    stamp = raw.pop("timestampUnixMs", None)
    if not isinstance(stamp, int) or isinstance(stamp, bool):
        raise JournalCorruptError("p", 3, "timestampUnixMs", f"must be an integer, got {stamp!r}")
    run_id = raw.pop("runId", None)
    if not isinstance(run_id, str):
        raise JournalCorruptError("p", 3, "runId", f"must be a string, got {run_id!r}")
    attempt = raw.pop("attempt", None)
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise JournalCorruptError("p", 3, "attempt", f"must be a positive integer, got {attempt!r}")
    optional: list[str | None] = []
    for name in ("taskId", "agentName", "traceId", "spanId"):
        value = raw.pop(name, _ABSENT)
        if value is not _ABSENT and not isinstance(value, str):
            raise JournalCorruptError("p", 3, name, f"must be a string, got {value!r}")
        optional.append(None if value is _ABSENT else value)
    sources = raw.pop("sourceEventSeqs", None)
    if sources is not None and not (
        isinstance(sources, list)
        and all(isinstance(s, int) and not isinstance(s, bool) for s in sources)
    ):
        raise JournalCorruptError(
            "p", 3, "sourceEventSeqs", f"must be a list of integers, got {sources!r}"
        )
    task_id, agent_name, trace_id, span_id = optional
    return JournalEvent(
        seq=seq,
        type=kind,
        run_id=run_id,
        attempt=attempt,
        timestamp_unix_ms=stamp,
        task_id=task_id,
        agent_name=agent_name,
        trace_id=trace_id,
        span_id=span_id,
        source_event_seqs=sources,
        data=raw,
    )


class Number(int):
    """An int subclass (an ``IntEnum``'s kind): the full checks accept it."""


class Text(str):
    """A str subclass: the full checks accept it."""


GOOD: dict[str, Any] = {
    "type": "tool/call",
    "seq": 4,
    "timestampUnixMs": 10,
    "runId": "r",
    "attempt": 1,
    "taskId": "t",
    "agentName": "a",
    "sourceEventSeqs": [3],
    "call": {"id": "c"},
}

CASES: dict[str, dict[str, Any]] = {
    "good": {},
    "no optional": {"taskId": _ABSENT, "agentName": _ABSENT, "sourceEventSeqs": _ABSENT},
    "traced": {"traceId": "ab", "spanId": "cd"},
    "trace only": {"traceId": "ab"},
    "span only": {"spanId": "cd"},
    "null trace": {"traceId": None},
    "null span": {"traceId": "ab", "spanId": None},
    "numeric span": {"spanId": 5},
    "seq missing": {"seq": _ABSENT},
    "seq zero": {"seq": 0},
    "seq bool": {"seq": True},
    "seq float": {"seq": 4.0},
    "seq subclass": {"seq": Number(4)},
    "type unknown": {"type": "nope"},
    "type missing": {"type": _ABSENT},
    "stamp bool": {"timestampUnixMs": False},
    "stamp text": {"timestampUnixMs": "10"},
    "stamp negative": {"timestampUnixMs": -5},
    "stamp subclass": {"timestampUnixMs": Number(10)},
    "run null": {"runId": None},
    "run subclass": {"runId": Text("r")},
    "attempt zero": {"attempt": 0},
    "attempt bool": {"attempt": True},
    "attempt subclass": {"attempt": Number(2)},
    "task null": {"taskId": None},
    "task number": {"taskId": 1},
    "task subclass": {"taskId": Text("t")},
    "agent null": {"agentName": None},
    "agent subclass": {"agentName": Text("a")},
    "sources null": {"sourceEventSeqs": None},
    "sources empty": {"sourceEventSeqs": []},
    "sources bool": {"sourceEventSeqs": [True]},
    "sources text": {"sourceEventSeqs": "3"},
    "sources subclass": {"sourceEventSeqs": [Number(3)]},
    "two bad fields": {"seq": 0, "runId": 5},
    "late bad field": {"attempt": 0, "taskId": 5},
}


def case(name: str) -> dict[str, Any]:
    raw = {**GOOD, **CASES[name]}
    return {key: value for key, value in raw.items() if value is not _ABSENT}


def outcome(parse: Any, raw: dict[str, Any]) -> tuple[str, Any]:
    try:
        event = parse(raw)
    except JournalCorruptError as exc:
        return "error", (exc.field, str(exc))
    return "event", (repr(event), [type(getattr(event, name)) for name in event.__slots__])


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fast_path_judges_as_the_full_checks(name: str) -> None:
    raw = case(name)
    expected = outcome(reference, raw)
    assert outcome(lambda r: from_json_object(r, line=3, path="p"), raw) == expected
    if name == "good":
        assert expected[0] == "event"


def test_a_line_as_written_parses_by_the_fast_path_to_the_same_event() -> None:
    line = (
        b'{"type":"tool/call","seq":4,"timestampUnixMs":10,"runId":"r","attempt":1,'
        b'"taskId":"t","agentName":"a","traceId":"ab","spanId":"cd","sourceEventSeqs":[3],'
        b'"call":{"id":"c"}}'
    )
    raw = {**GOOD, "traceId": "ab", "spanId": "cd"}
    assert parse_line_bytes(line) == reference(raw)
