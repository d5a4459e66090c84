"""``oma_actors.jsontext``: orjson's text only where it is the standard encoder's, byte for byte."""

from __future__ import annotations

import dataclasses
import enum
import json
import uuid
from collections import OrderedDict
from typing import Any

import pytest

from oma_actors.journal.jsjson import js_dumps, reference_dumps
from oma_actors.jsontext import NotExact, compact_dumps, exact_loads, plain_text, string_literal


def _standard(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Colour(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    ONE = 1


class Mode(enum.StrEnum):
    FAST = "fast"


@dataclasses.dataclass
class Point:
    x: int


def _every_code_point() -> str:
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def test_every_code_point_escapes_as_json_dumps_does() -> None:
    text = _every_code_point()
    assert string_literal(text) == json.dumps(text, ensure_ascii=False)
    assert compact_dumps({"s": text, "l": [text]}) == _standard({"s": text, "l": [text]})
    assert plain_text(text) is not None  # the fast path was the one checked


PLAIN = [
    {"role": "user", "content": [{"type": "text", "text": 'héllo \n\t"q" \\ \x00 \x1f \x7f'}]},
    [1, -2, 2**53 - 1, -(2**53 - 1), True, False, None, "", [], {}],
    ("a", ("b", 1)),
    "just a string",
    0,
]


@pytest.mark.parametrize("value", PLAIN, ids=range(len(PLAIN)))
def test_plain_values_take_orjson_with_the_same_text(value: Any) -> None:
    assert plain_text(value) == _standard(value)
    assert compact_dumps(value) == _standard(value)


# Each of these orjson would write unlike ``json.dumps`` (or accept where it refuses): the walk
# or orjson's options must send it to the standard encoder.
NOT_PLAIN = {
    "float whole": {"x": 1.0},
    "float exponent": [1e16, 1e-7, 1.5e300],
    "negative zero": [-0.0],
    "large int": [2**53, 2**64, -(2**70)],
    "lone surrogate": ["a\ud800b"],
    "non-string key": {1: "a", None: "b"},
    "dict subclass": OrderedDict(a=[1.5]),
    "str enum": [Mode.FAST],
    "int enum": {"n": Size.ONE},
}


@pytest.mark.parametrize("value", NOT_PLAIN.values(), ids=NOT_PLAIN.keys())
def test_what_orjson_would_write_otherwise_gets_the_standard_text(value: Any) -> None:
    assert plain_text(value) is None
    assert compact_dumps(value) == _standard(value)


REFUSED = {
    "nan": [float("nan")],
    "infinity": {"x": float("inf")},
    "enum": [Colour.RED],
    "uuid": [uuid.UUID(int=7)],
    "dataclass": {"p": Point(1)},
    "set": {"s": {1}},
}


@pytest.mark.parametrize("value", REFUSED.values(), ids=REFUSED.keys())
def test_what_json_dumps_refuses_is_refused_alike(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)) as standard:
        _standard(value)
    with pytest.raises(standard.type):
        compact_dumps(value)


def test_a_lone_surrogate_literal_is_json_dumps_own() -> None:
    assert string_literal("x\udc00") == json.dumps("x\udc00", ensure_ascii=False)


@pytest.mark.parametrize("value", [Colour.RED, uuid.UUID(int=7), [Point(1)]], ids=str)
def test_the_journal_encoder_refuses_what_is_no_json_value(value: Any) -> None:
    # orjson writes an Enum, a UUID (and, without its passthrough option, a dataclass) by
    # itself; a journal line must hold JSON values only, as the reference encoder says.
    with pytest.raises(TypeError):
        reference_dumps(value)
    with pytest.raises(TypeError):
        js_dumps(value)


EXACT_TEXTS = [
    '{"a":1,"b":[true,false,null],"c":{"d":"\\u00e9\\n"}}',
    '{"a":0.1,"b":-0.0,"c":1E5,"d":1e-400,"e":2.5e-8}',
    '{"a":1,"a":2}',
    '{"max":922337203685477580,"min":-922337203685477580,"id":"184467440737095516"}',
    '["x", 123456789012345678, "1234 5678 9012 3456 7890 12"]',
]
NOT_EXACT_TEXTS = [
    '{"a":123456789012345678901234567890}',  # orjson: a float; json: the integer
    '{"a":-9223372036854775809}',
    '{"a":9223372036854775807}',  # within 64 bits, but 19 digits: left to json all the same
    '{"a":"1234567890123456789"}',  # 19 digits in a string: the guard does not parse
    '{"a":1e400}',  # json: infinity; orjson refuses
    '{"a":NaN}',
    '{"a":"\\ud800"}',  # a lone surrogate escape
    '{"a":1',
    "[" * 2000 + "]" * 2000,
]


@pytest.mark.parametrize("text", EXACT_TEXTS)
@pytest.mark.parametrize("kind", [str, bytes])
def test_exact_loads_reads_what_json_reads(text: str, kind: type) -> None:
    data = text if kind is str else text.encode()
    value = exact_loads(data)
    assert value == json.loads(text)
    assert repr(value) == repr(json.loads(text))  # the same types too (int vs float)


@pytest.mark.parametrize("text", NOT_EXACT_TEXTS)
@pytest.mark.parametrize("kind", [str, bytes])
def test_exact_loads_leaves_to_json_what_orjson_reads_otherwise_or_refuses(
    text: str, kind: type
) -> None:
    with pytest.raises(NotExact):
        exact_loads(text if kind is str else text.encode())


def test_a_str_holding_a_lone_surrogate_itself_is_left_to_json() -> None:
    # Not an escape: the character itself, which no UTF-8 text (so no orjson read) can hold.
    text = '{"a":"\ud800"}'
    with pytest.raises(NotExact):
        exact_loads(text)
    assert json.loads(text) == {"a": "\ud800"}
