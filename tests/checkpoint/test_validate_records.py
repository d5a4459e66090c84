"""An in-flight entry's tool call records are checked before a restore resumes from them.

OMA's record is ``{toolName, input, output, duration}``; a journal-first snapshot leaves out the
members its call and its result hold (``checkpoint.once``). Before, a record was read leniently
(``str``, ``dict``, ``int`` of whatever was there): ``"duration": "3"`` or ``true`` and an
``input`` of key/value pairs were taken, and a record that was no object failed with Python's
own message. Now each member present is checked and the error names it, in both forms.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest
from checkpoint_support import KEY
from test_checkpoint_once import durable, snapshot_with_rounds

from oma_actors.checkpoint import decode, encode
from oma_actors.errors import CheckpointError

WHERE = "inFlightTasks[0].toolCalls[1]"


def _oma(snapshot: Any) -> Any:
    return replace(snapshot, version=4, journal_watermark_seq=None, journal_ref=None)


@pytest.mark.parametrize("form", [durable, _oma], ids=["journal-first", "oma"])
@pytest.mark.parametrize(
    ("record", "named"),
    [
        ("x", f"{WHERE} is not an object"),
        (None, f"{WHERE} is not an object"),
        ({"input": [["a", 1]]}, f"{WHERE}.input is not an object"),
        ({"input": "ab"}, f"{WHERE}.input is not an object"),
        ({"duration": "3"}, f"{WHERE}.duration is not a finite non-negative number"),
        ({"duration": True}, f"{WHERE}.duration is not a finite non-negative number"),
        ({"duration": -1}, f"{WHERE}.duration is not a finite non-negative number"),
        ({"toolName": 7}, f"{WHERE}.toolName is not a string"),
        ({"output": ["o"]}, f"{WHERE}.output is not a string"),
    ],
)
def test_a_bad_record_is_refused_by_name(form: Any, record: Any, named: str) -> None:
    raw = json.loads(encode(form(snapshot_with_rounds())))
    records = raw["inFlightTasks"][0]["toolCalls"]
    if isinstance(record, dict):
        records[1].update(record)
    else:
        records[1] = record
    with pytest.raises(CheckpointError, match=re.escape(named)):
        decode(json.dumps(raw), key=KEY)


@pytest.mark.parametrize("form", [durable, _oma], ids=["journal-first", "oma"])
def test_good_records_still_decode_to_the_state(form: Any) -> None:
    snapshot = form(snapshot_with_rounds())
    raw = json.loads(encode(snapshot))
    record = raw["inFlightTasks"][0]["toolCalls"][1]
    record["duration"] = float(record["duration"])  # a number JavaScript may write as 1.0
    restored = decode(json.dumps(raw), key=KEY)
    assert restored.in_flight[0].state.tool_calls == snapshot.in_flight[0].state.tool_calls
