"""A state file and a snapshot read back every number exactly, whichever parser reads them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from oma_actors.checkpoint.codec import decode, encode
from oma_actors.stores.base import MemoryEntry
from oma_actors.stores.file_format import decode_store, encode_store
from tests.checkpoint.checkpoint_support import make_snapshot

NUMBERS = [2**70, -(2**63) - 1, 2**63 - 1, 10**18, 0.1, 1e300, -0.0, 7]


@pytest.mark.parametrize("number", NUMBERS, ids=repr)
def test_a_state_file_keeps_its_numbers_exact(number: int | float) -> None:
    entry = MemoryEntry(
        key="k",
        value="v",
        metadata={"n": number, "nested": [{"n": number}]},
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    read = decode_store("state.json", encode_store([entry]))["k"].metadata
    assert read == {"n": number, "nested": [{"n": number}]}
    assert repr(read) == repr({"n": number, "nested": [{"n": number}]})  # int stays int


@pytest.mark.parametrize("number", NUMBERS, ids=repr)
def test_a_snapshot_keeps_its_numbers_exact(number: int | float) -> None:
    snapshot = make_snapshot(metadata={"n": number})
    text = encode(snapshot)
    assert json.loads(text)["metadata"] == {"n": number}
    read = decode(text, key="k").metadata
    assert repr(read) == repr({"n": number})
