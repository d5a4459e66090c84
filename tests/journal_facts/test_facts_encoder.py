"""``js_dumps``'s orjson path writes exactly the bytes of the reference encoder (issue 19 step 6).

The reference (``reference_dumps``) is the JavaScript-identical encoder the journal always had;
the fast path must agree with it on every string, every number layout, and must refuse (so the
reference decides) whatever orjson would write differently or accept where the reference refuses.
"""

from __future__ import annotations

import datetime
import json
import math
import random
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from oma_actors.journal.jsjson import js_dumps, reference_dumps

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"


def same(value: Any) -> None:
    assert js_dumps(value) == reference_dumps(value), value


def test_every_code_point_escapes_as_the_reference() -> None:
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(chars), 4096):
        chunk = chars[start : start + 4096]
        same(chunk)  # one list per chunk: each string escapes on its own
        same("".join(chunk))


def test_a_lone_surrogate_is_escaped_as_javascript_does() -> None:
    assert js_dumps({"t": "a\ud800b"}) == '{"t":"a\\ud800b"}'


@pytest.mark.parametrize(
    "number",
    [1.0, -0.0, 0.0, 100.0, 1e15, 1e16, 1e20, 1e21, 1e-6, 1e-7, 2.5e-5, 5e-324, 0.1 + 0.2,
     1.7976931348623157e308, math.inf, -math.inf, math.nan, 123.456, -1.5e-7],
)  # fmt: skip
def test_float_layouts_are_the_references(number: float) -> None:
    same(number)
    same([number])
    same({"x": number, "y": [number, {"z": number}]})


def test_random_floats_across_magnitudes_are_the_references() -> None:
    rng = random.Random(19)
    for _ in range(20_000):
        bits = rng.getrandbits(64)
        number = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
        same({"v": number})
        scaled = rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)
        same([scaled, round(scaled), float(round(scaled))])


@pytest.mark.parametrize("number", [2**53, 2**53 + 1, -(2**53) - 1, 2**64, 10**30])
def test_integers_past_two_to_the_53_print_as_doubles(number: int) -> None:
    same({"n": number})
    same([number])


def test_integers_within_two_to_the_53_print_as_themselves() -> None:
    assert js_dumps([2**53 - 1, -(2**53) + 1]) == f"[{2**53 - 1},{-(2**53) + 1}]"


@dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        Point(1),
        datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        datetime.date(2026, 1, 1),
        {1: "non-string key"},
        {"nested": [object()]},
        {1, 2},
        b"bytes",
    ],
    ids=["dataclass", "datetime", "date", "int-key", "object", "set", "bytes"],
)
def test_what_the_reference_refuses_is_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        reference_dumps(value)
    with pytest.raises(TypeError):
        js_dumps(value)


def test_subclasses_of_json_types_write_as_the_reference() -> None:
    class Name(str):
        pass

    class Count(int):
        pass

    class Bag(dict[str, Any]):
        pass

    same(Bag(a=Name("x"), b=Count(3), c=(1, 2)))


def test_deep_nesting_is_written_by_the_reference() -> None:
    deep: Any = "leaf"
    for _ in range(400):  # deeper than orjson writes
        deep = [deep]
    same(deep)


def test_every_golden_journal_line_re_encodes_to_itself() -> None:
    lines = [line for path in sorted(GOLDEN.glob("*.jsonl")) for line in path.read_text().splitlines()]  # fmt: skip
    assert len(lines) > 500
    for line in lines:
        value = json.loads(line)
        assert js_dumps(value) == line
        assert reference_dumps(value) == line


def test_the_shared_oma_fixtures_encode_as_the_reference() -> None:
    found = sorted(FIXTURES.rglob("*.json"))
    if not found:
        pytest.skip(f"no shared fixtures at {FIXTURES}")
    for path in found:
        same(json.loads(path.read_text()))
