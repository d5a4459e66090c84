"""``verify_run`` on good, edited, duplicated and gapped journals (spec JR-21..JR-23).

The fixture is OMA's #527 acceptance fixture from tests/verify.test.ts, in our vocabulary.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from oma_actors.journal import JournalEvent, verify_events, verify_run
from oma_actors.journal import vocabulary as v

FIRST = {"type": "text", "text": "Investigate deploy failure"}
SUMMARY = {"type": "text", "text": "Summary: auth refresh timed out; retry budget exhausted."}


def ev(seq: int, kind: str, sources: list[int] | None = None, **data: Any) -> JournalEvent:
    return JournalEvent(
        seq=seq, type=kind, run_id="deploy-failure", attempt=1,
        timestamp_unix_ms=1_700_000_000_000 + seq, task_id="task-1",
        agent_name="investigator", source_event_seqs=sources, data=data,
    )  # fmt: skip


def fixture(summary_block: dict[str, Any], summary_lineage: list[int] | None) -> list[JournalEvent]:
    def block(index: int, role: str, content: dict[str, Any], lineage: list[int] | None) -> Any:
        return v.request_block(
            message_index=index, block_index=0, role=role,  # type: ignore[arg-type]
            block=content, source_event_seqs=lineage,
        )  # fmt: skip

    return [
        ev(1, "user/message", message={"role": "user", "content": [FIRST]}, origin="input"),
        ev(2, "assistant/message", [1], origin="response",
           message={"role": "assistant", "content": [{"type": "text", "text": "I will look"}]}),
        ev(3, "tool/call", [2], call={"type": "tool_use", "id": "c", "name": "logs", "input": {}}),
        ev(4, "tool/result", [3], toolCallId="c",
           result={"type": "tool_result", "tool_use_id": "c", "content": "[raw logs]"}),
        ev(5, "llm/request", turn=2, model="mock-model",
           blocks=[block(0, "user", FIRST, [1]), block(1, "assistant", summary_block, summary_lineage)]),
    ]  # fmt: skip


def codes(findings: list[Any]) -> list[tuple[str, str, int]]:
    return [(f.code, f.reason, f.seq) for f in findings]


async def test_a_block_naming_lineage_that_does_not_reproduce_it_fails() -> None:
    result = await verify_run(fixture(SUMMARY, [1, 2]))
    assert not result.ok
    assert codes(result.failures) == [("MISSING_CONTEXT_REPLACE", "not-reproducible", 5)]
    assert (result.failures[0].message_index, result.failures[0].block_index) == (1, 0)
    assert result.inconclusive == []
    assert result.stats == {"events": 5, "requests": 1, "blocks_checked": 2}


async def test_a_block_with_no_lineage_fails() -> None:
    result = await verify_run(fixture(SUMMARY, None))
    assert codes(result.failures) == [("MISSING_CONTEXT_REPLACE", "no-lineage", 5)]


async def test_a_good_journal_verifies() -> None:
    good = fixture({"type": "text", "text": "I will look"}, [2])
    result = await verify_run(good)
    assert (result.ok, result.failures, result.inconclusive) == (True, [], [])


async def test_an_edited_event_is_caught() -> None:
    events = fixture({"type": "text", "text": "I will look"}, [2])
    edited = dataclasses.replace(
        events[1], data={**events[1].data, "message": {"role": "assistant", "content": [SUMMARY]}}
    )
    result = await verify_run([events[0], edited, *events[2:]])
    assert codes(result.failures) == [("MISSING_CONTEXT_REPLACE", "not-reproducible", 5)]


async def test_a_context_replace_explains_a_derived_block() -> None:
    events = fixture(SUMMARY, [6])[:4]
    events.append(ev(6, "context/replace", strategy="summarize",
                     dropped={"sourceEventSeqs": [2, 3, 4]},
                     replacements=[{"sourceEventSeqs": [2, 3, 4], "block": SUMMARY}]))  # fmt: skip
    request = fixture(SUMMARY, [6])[4]
    events.append(dataclasses.replace(request, seq=7))
    result = verify_events(events)
    assert (result.ok, result.failures, result.inconclusive) == (True, [], [])


async def test_duplicated_and_out_of_order_sequences_fail() -> None:
    first, second, third = fixture(SUMMARY, [1, 2])[:3]
    duplicated = await verify_run([first, second, dataclasses.replace(second)])
    assert codes(duplicated.failures) == [("SEQ_NOT_MONOTONIC", "duplicate-sequence", 2)]
    reordered = await verify_run([first, third, second])
    assert codes(reordered.failures) == [("SEQ_NOT_MONOTONIC", "out-of-order-sequence", 2)]


async def test_an_evicted_head_is_inconclusive_and_a_forward_link_fails() -> None:
    _, second, third, fourth = fixture(SUMMARY, [1, 2])[:4]
    evicted = await verify_run([second, third, fourth])
    assert evicted.ok
    assert evicted.failures == []
    assert [(f.seq, f.missing_seqs) for f in evicted.inconclusive] == [(2, (1,))]

    forward = await verify_run([second, dataclasses.replace(third, source_event_seqs=[9]), fourth])
    assert codes(forward.failures) == [("BROKEN_LINK", "forward-reference", 3)]


async def test_a_request_block_whose_source_was_evicted_is_inconclusive() -> None:
    events = fixture({"type": "text", "text": "I will look"}, [2])
    result = await verify_run([e for e in events if e.seq != 1])
    assert result.ok
    assert [(f.code, f.seq, f.missing_seqs) for f in result.inconclusive] == [
        ("BROKEN_LINK", 2, (1,)),
        ("MISSING_CONTEXT_REPLACE", 5, (1,)),
    ]


async def test_forward_gaps_are_legal_and_an_empty_journal_verifies() -> None:
    first, second = fixture(SUMMARY, [1])[:2]
    assert (await verify_run([first, dataclasses.replace(second, seq=9)])).ok
    empty = await verify_run([])
    assert empty.ok
    assert empty.stats == {"events": 0, "requests": 0, "blocks_checked": 0}


async def test_an_event_citing_its_own_seq_is_a_broken_link() -> None:
    # Guards the ``>=`` of verify_events' forward check: an event cannot be its own source (it
    # did not exist when it was derived), so a self-citation is a failure, not a valid link.
    first, second, third = fixture(SUMMARY, [1])[:3]
    self_cited = await verify_run(
        [first, second, dataclasses.replace(third, source_event_seqs=[3])]
    )
    assert not self_cited.ok
    assert codes(self_cited.failures) == [("BROKEN_LINK", "forward-reference", 3)]

    replaced = ev(4, "context/replace", dropped={"sourceEventSeqs": [4]}, replacements=[])
    assert codes((await verify_run([first, second, third, replaced])).failures) == [
        ("BROKEN_LINK", "forward-reference", 4)
    ]
