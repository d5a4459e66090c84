"""Schema v5 (spec JR-10): written only by a run with a journal; v4 stays byte for byte."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from checkpoint_support import KEY, golden_json, golden_text, make_snapshot
from fold_support import entry, executing, journaled

from oma_actors.checkpoint import Checkpoint, InFlightTask, decode, encode
from oma_actors.checkpoint.validate import problem
from oma_actors.errors import CheckpointError
from oma_actors.journal.fields import adopt_journal_fields
from oma_actors.stores import InMemoryStore


def _v4_keys(snapshot_json: dict[str, object]) -> set[str]:
    return set(snapshot_json) - {"journalWatermarkSeq", "journalRef"}


def test_a_run_without_a_journal_writes_v4_even_with_entry_marks() -> None:
    """Marks on entries alone do not make v5: the snapshot's watermark does."""
    marked = make_snapshot(in_flight=(executing(mark=7, lineage=True),))
    plain = make_snapshot(in_flight=(executing(mark=None),))
    assert encode(marked) == encode(plain)
    out = json.loads(encode(marked))
    assert out["version"] == 4
    assert "journalWatermarkSeq" not in out
    assert "journalRef" not in out
    assert "journalSeq" not in out["inFlightTasks"][0]
    assert "conversationLineage" not in out["inFlightTasks"][0]


def test_a_journaled_run_writes_v5_with_every_v4_key() -> None:
    snapshot = journaled(executing(mark=99, lineage=True), watermark=100)
    out = json.loads(encode(snapshot))
    v4 = json.loads(encode(replace(snapshot, journal_watermark_seq=None, journal_ref=None)))
    assert out["version"] == 5
    assert _v4_keys(out) == set(v4)
    assert out["journalWatermarkSeq"] == 100
    assert out["journalRef"] == {"kind": "InMemoryRunJournal"}
    (item,) = out["inFlightTasks"]
    assert item["journalSeq"] == 99
    assert item["conversationLineage"] == [[None], [None]]
    assert problem(out) is None


def test_the_journal_members_follow_the_v4_members_and_precede_ours() -> None:
    out = json.loads(encode(replace(journaled(executing()), announced=("a",))))
    keys = list(out)
    assert keys.index("approvalDecisions") + 1 == keys.index("journalWatermarkSeq")
    assert keys.index("journalWatermarkSeq") + 1 == keys.index("journalRef")
    assert keys.index("journalRef") + 1 == keys.index("announcedTaskIds")


async def test_the_store_entry_metadata_says_the_version_the_snapshot_was_written_in() -> None:
    """CK-03: OMA's tools read the entry's ``metadata.version``; a v5 value must say 5."""
    store = InMemoryStore()
    checkpoint = Checkpoint(store, run_id="run-v5")
    for snapshot, version in ((journaled(executing()), 5), (make_snapshot(), 4)):
        text = await checkpoint.save(snapshot)
        stored = await store.get(checkpoint.key)
        assert stored is not None
        assert stored.metadata is not None
        assert json.loads(text)["version"] == stored.metadata["version"] == version


def test_a_journaled_snapshot_without_a_ref_or_marks_writes_only_the_watermark() -> None:
    snapshot = replace(journaled(entry(mark=None)), journal_ref=None)
    out = json.loads(encode(snapshot))
    assert out["journalWatermarkSeq"] == 100
    assert "journalRef" not in out
    assert "journalSeq" not in out["inFlightTasks"][0]
    assert problem(out) is None


def test_v5_round_trip_through_decode_and_adopt() -> None:
    snapshot = journaled(executing(mark=99, lineage=True), entry(task_id="c", mark=None))
    text = encode(snapshot)
    back = adopt_journal_fields(decode(text, key=KEY))
    assert replace(back, version=5) == snapshot
    assert encode(back) == text


def test_decode_reads_a_v5_value_as_its_v4_part() -> None:
    """JR-11: restoring without a journal is a v4 restore; the v5 members stay in ``source``."""
    stored = decode(encode(journaled(executing(mark=99))), key=KEY)
    assert stored.journal_watermark_seq is None
    assert stored.in_flight[0].journal_seq is None
    assert json.loads(encode(stored))["version"] == 4


def test_the_golden_v5_value_is_adopted_and_written_back() -> None:
    raw = golden_json("v5.json")
    snapshot = adopt_journal_fields(decode(golden_text("v5.json"), key=KEY))
    assert snapshot.journal_watermark_seq == 57
    assert snapshot.journal_ref == {"kind": "file", "path": "runs/run-v3-pricing.journal.jsonl"}
    assert [item.journal_seq for item in snapshot.in_flight] == [55, 57]
    first, second = snapshot.in_flight
    assert first.conversation_lineage == ((None,), (None, (53,), (54,)))
    assert second.conversation_lineage is None
    out = json.loads(encode(snapshot))
    assert out["version"] == 5
    assert set(raw) <= set(out)
    for name in ("journalWatermarkSeq", "journalRef"):
        assert out[name] == raw[name]
    for written, stored in zip(out["inFlightTasks"], raw["inFlightTasks"], strict=True):
        assert written.get("journalSeq") == stored.get("journalSeq")
        assert written.get("conversationLineage") == stored.get("conversationLineage")
    assert problem(out) is None


def test_adopting_is_idempotent_and_leaves_v4_alone() -> None:
    v4 = decode(encode(make_snapshot()), key=KEY)
    assert adopt_journal_fields(v4) is v4
    journal = journaled(executing())
    assert adopt_journal_fields(journal) is journal


def test_adopting_matches_entries_by_task_id_not_position() -> None:
    snapshot = journaled(executing(mark=90), entry(task_id="c", mark=95))
    stored = decode(encode(snapshot), key=KEY)
    swapped = replace(stored, in_flight=stored.in_flight[::-1])
    adopted = adopt_journal_fields(swapped)
    assert {item.task_id: item.journal_seq for item in adopted.in_flight} == {"b": 90, "c": 95}


def test_a_lineage_that_does_not_match_the_conversation_is_refused() -> None:
    """T-100 at the source: a lineage must have one element per conversation message."""
    state = entry().state
    with pytest.raises(ValueError, match="1 messages"):
        InFlightTask(task_id="b", assignee="w", state=state, conversation_lineage=((), ()))
    assert InFlightTask(task_id="b", assignee="w", state=state, conversation_lineage=((None,),))


def test_a_stored_lineage_of_the_wrong_length_is_not_a_checkpoint() -> None:
    out = json.loads(encode(journaled(executing(lineage=True))))
    out["inFlightTasks"][0]["conversationLineage"] = [[None]]
    with pytest.raises(CheckpointError, match="conversationLineage"):
        decode(json.dumps(out), key=KEY)


def test_v4_output_is_unchanged_by_the_v5_fields_defaults() -> None:
    """The golden v4 value re-encodes to the same text (no v5 member appears)."""
    v4 = decode(golden_text("v4.json"), key=KEY)
    assert v4.journal_watermark_seq is None
    assert "journal" not in encode(v4)
