"""``parse_line``, ``parse_line_bytes`` and ``parse_lines_bytes``: orjson where it reads the value
``json`` would, else the ``json`` module; all give the event ``json.loads`` and
``from_json_object`` make, line by line, and the same first error."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oma_actors.journal.codec import (
    _SLOTS,
    from_json_object,
    parse_line,
    parse_line_bytes,
    parse_lines_bytes,
    slot_setters,
)
from oma_actors.journal.errors import JournalCorruptError
from oma_actors.journal.event import JournalEvent

BASE = '{"type":"tool/result","seq":7,"timestampUnixMs":1,"runId":"r","attempt":1,'


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def reference(text: str) -> str:
    """The event the ``json`` module reads from ``text`` (the standard both parsers keep), or
    ``"error"`` where it refuses (NaN and the infinities too, as a journal line does)."""
    try:
        return repr(from_json_object(json.loads(text, parse_constant=_no_constant)))
    except ValueError:
        return "error"


def both(text: str) -> tuple[Any, Any]:
    """The event (or the error's text) from ``parse_line`` and ``parse_line_bytes``, after
    checking that ``parse_lines_bytes`` of the line alone reads what ``parse_line_bytes`` does."""
    out = []
    for by_bytes in (False, True):
        try:
            event = parse_line_bytes(text.encode()) if by_bytes else parse_line(text)
        except JournalCorruptError as exc:
            out.append(f"error: {exc}")
        else:
            out.append(repr(event))
    assert _batch([text]) == [out[1]]
    return out[0], out[1]


def _batch(texts: list[str]) -> list[str]:
    """``parse_lines_bytes`` of ``texts``: each event's repr, or the error's text alone."""
    try:
        return [repr(event) for event in parse_lines_bytes([t.encode() for t in texts])]
    except JournalCorruptError as exc:
        return [f"error: {exc}"]


@pytest.mark.parametrize(
    "tail",
    [
        '"n":9223372036854775807}',  # the largest int orjson keeps exact
        '"n":123456789012345678901234567890}',  # orjson: a float; json: this int
        '"n":-9223372036854775809}',
        '"n":18446744073709551616}',
        '"n":1e400}',  # orjson refuses, json reads inf
        '"s":"\\ud800"}',  # a lone surrogate escape: orjson refuses, json keeps it
        '"f":0.1,"g":-0,"h":1E5,"u":"\\u00fc\\n"}',
        '"a":1,"a":2}',
    ],
)
def test_the_same_event_as_parse_line(tail: str) -> None:
    first, second = both(BASE + tail)
    assert first == second == reference(BASE + tail)


@pytest.mark.parametrize(
    "text",
    ["[1,2]", '{"type":"nope","seq":1}', '{"seq":0}', "{not json", '{"n":NaN}', ""],
)
def test_the_same_error_as_parse_line(text: str) -> None:
    first, second = both(text)
    assert first == second
    assert first.startswith("error: ")


def test_a_line_that_is_not_utf8_fails_as_its_decode_does() -> None:
    with pytest.raises(UnicodeDecodeError):
        parse_line_bytes(BASE.encode() + b'"s":"\xff"}')
    with pytest.raises(UnicodeDecodeError):
        parse_lines_bytes([BASE.encode() + b'"s":"x"}', BASE.encode() + b'"s":"\xff"}'])


def test_a_batch_reads_each_line_as_it_reads_alone() -> None:
    """One digit check covers the batch: a long integer on any line sends every line to the
    reader that keeps it exact, a line before it included (orjson alone reads a float)."""
    plain, long = BASE + '"n":1}', BASE + '"n":123456789012345678901234567890}'
    for lines in ([plain, long], [long, plain], [plain, plain]):
        assert _batch(lines) == [both(line)[1] for line in lines]
    (event,) = parse_lines_bytes([long.encode()])
    assert event.data["n"] == 123456789012345678901234567890


def test_a_long_integer_past_the_first_group_of_lines_is_read_exactly() -> None:
    """The digit check runs over groups of lines (``_CHECKED_TOGETHER``): every group counts,
    not only the first, so a long integer on line 200 of a tail is still read exactly."""
    plain, long = BASE + '"n":1}', BASE + '"n":123456789012345678901234567890}'
    lines = [plain.encode()] * 199 + [long.encode()] + [plain.encode()] * 3
    events = parse_lines_bytes(lines)
    assert events[199].data["n"] == 123456789012345678901234567890
    assert [event.data["n"] for event in events[:199]] == [1] * 199


def test_a_batch_fails_with_its_first_bad_line_s_error() -> None:
    good = BASE + '"n":1}'
    for bad in ("[1,2]", '{"n":NaN}', "{not json", '{"type":"nope","seq":1}'):
        assert _batch([good, bad, "{also not json"]) == [both(bad)[1]]


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text().map(lambda k: "x" + k), _VALUES, max_size=4))
def test_any_data_reads_the_same(data: dict[str, Any]) -> None:
    text = BASE + json.dumps(data, ensure_ascii=False)[1:] if data else BASE[:-1] + "}"
    first, second = both(text)
    assert first == second
    assert first.startswith("error: ") if reference(text) == "error" else first == reference(text)


def test_parsed_event_is_the_dataclass_built_by_its_init() -> None:
    """``_event_of`` sets the slots itself: every field, as ``__init__`` would."""
    line = (
        '{"type":"tool/result","seq":7,"timestampUnixMs":5,"runId":"r","attempt":2,'
        '"taskId":"t","agentName":"a","traceId":"x","spanId":"y","sourceEventSeqs":[3,4],'
        '"toolCallId":"c"}'
    )
    expected = JournalEvent(
        seq=7,
        type="tool/result",
        run_id="r",
        attempt=2,
        timestamp_unix_ms=5,
        task_id="t",
        agent_name="a",
        trace_id="x",
        span_id="y",
        source_event_seqs=[3, 4],
        data={"toolCallId": "c"},
    )
    for event in (parse_line(line), parse_line_bytes(line.encode())):
        assert event == expected
        assert repr(event) == repr(expected)
        assert {f.name: getattr(event, f.name) for f in dataclasses.fields(event)} == {
            f.name: getattr(expected, f.name) for f in dataclasses.fields(expected)
        }


def test_slot_setters_refuse_a_field_list_that_is_not_the_class_s() -> None:
    with pytest.raises(TypeError, match="not"):
        slot_setters(JournalEvent, ("seq", "type"))
    assert len(slot_setters(JournalEvent, _SLOTS)) == len(dataclasses.fields(JournalEvent))
