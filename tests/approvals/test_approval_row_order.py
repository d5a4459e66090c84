"""Ledger rows keep OMA's member order: OMA writes them with ``JSON.stringify``, never sorted.

A row OMA wrote (its request members in OMA's order, the content in whatever order OMA built it)
and then decided here must come back byte for byte, with only the ``decision`` appended.
"""

from __future__ import annotations

import json

from approval_helpers import tool_request
from ledger_helpers import _decide, _ledger

from oma_actors.approvals import approval_key, request_to_json
from oma_actors.stores import InMemoryStore

REQUEST_ORDER = ["version", "id", "runId", "scope", "boundary", "requestHash", "requestedAt"]
DECISION_ORDER = [
    "version", "requestId", "runId", "scope", "requestHash", "decision", "reviewer", "decidedAt"
]  # fmt: skip


async def test_a_new_row_is_written_in_omas_member_order() -> None:
    store = InMemoryStore()
    record = await _ledger(store).ensure_request(tool_request())
    row = json.loads(record.raw)
    assert list(row) == ["version", "request"]
    assert list(row["request"]) == [*REQUEST_ORDER, "reason", "content"]
    decided = json.loads((await _decide(_ledger(store))).raw)
    assert list(decided) == ["version", "request", "decision"]
    assert list(decided["decision"]) == DECISION_ORDER


async def test_deciding_a_row_oma_wrote_keeps_its_text_and_appends_the_decision() -> None:
    store = InMemoryStore()
    request = request_to_json(tool_request())
    # OMA's content order is its builder's, not sorted: reversing it keeps the hash (taken
    # over sorted keys) and makes any re-sorting visible.
    request["content"] = dict(reversed(list(request["content"].items())))
    assert list(request["content"]) != sorted(request["content"])
    text = json.dumps({"version": 1, "request": request}, separators=(",", ":"), ensure_ascii=False)
    await store.set(approval_key(request["id"]), text)

    decided = await _decide(_ledger(store))

    stored = await store.get(approval_key(request["id"]))
    assert stored is not None
    assert stored.value == decided.raw
    assert decided.raw.startswith(text[:-1] + ',"decision":{')
    assert list(json.loads(decided.raw)["decision"]) == DECISION_ORDER
