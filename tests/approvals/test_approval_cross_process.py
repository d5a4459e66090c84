"""Reviewers in other processes: one after another, and two at once on one SqliteStore."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from approval_helpers import tool_request

from oma_actors.approvals import DurableApprovalLedger, get_approval_record
from oma_actors.domain.approvals import Reviewer
from oma_actors.stores import FileStore, SqliteStore

ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from approval_helpers import tool_request
from oma_actors.approvals import DurableApprovalLedger
from oma_actors.stores import FileStore

async def main(path):
    async with FileStore.open(path) as store:
        record = await DurableApprovalLedger(store).ensure_request(tool_request())
    print(record.request.id, record.request.request_hash)

asyncio.run(main(sys.argv[1]))
"""

REVIEWER = """
import asyncio, sys
from oma_actors.approvals import decide_approval
from oma_actors.domain.approvals import Reviewer
from oma_actors.errors import DurableApprovalError
from oma_actors.stores import FileStore

async def main(path, request_id, request_hash, decision, reviewer):
    async with FileStore.open(path) as store:
        try:
            record = await decide_approval(
                store, request_id=request_id, request_hash=request_hash,
                decision=decision, reviewer=Reviewer(reviewer),
            )
        except DurableApprovalError as exc:
            print(exc.code)
            return 1
    print(record.decision.decision, record.decision.reviewer.id)
    return 0

sys.exit(asyncio.run(main(*sys.argv[1:])))
"""


async def _python(script: str, *args: str) -> tuple[int, str]:
    process = await _start(script, *args)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    assert not err, err.decode()
    return process.returncode, out.decode().strip()


async def _start(script: str, *args: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )


async def test_a_reviewer_in_another_process_decides_and_the_first_decision_wins(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "state.json")
    code, printed = await _python(WRITER, path, str(Path(__file__).parent))
    assert code == 0
    request_id, request_hash = printed.split()
    assert (request_id, request_hash) == (tool_request().id, tool_request().request_hash)

    assert await _python(REVIEWER, path, request_id, "0" * 64, "approve", "finance") == (
        1,
        "APPROVAL_STALE_DECISION",
    )
    assert await _python(REVIEWER, path, request_id, request_hash, "approve", "finance") == (
        0,
        "approved finance",
    )
    assert await _python(REVIEWER, path, request_id, request_hash, "reject", "auditor") == (
        1,
        "APPROVAL_CONFLICT",
    )
    assert await _python(REVIEWER, path, request_id, request_hash, "approve", "finance") == (
        0,
        "approved finance",
    )

    async with FileStore.open(path) as fresh:
        record = await get_approval_record(fresh, request_id)
    assert record is not None
    assert record.decision is not None
    assert record.request == tool_request()
    assert record.decision.decision == "approved"
    assert record.decision.reviewer == Reviewer("finance")


# Decides every request given on the command line, one per round, against a rival process. After
# its first read of a round's request, each waits until the rival has read it too: both have seen
# the request still pending, so both really race for the one decision, every round.
RACER = """
import asyncio, json, os, sys, time
from pathlib import Path
from oma_actors.stores import SqliteStore
from oma_actors.approvals import decide_approval
from oma_actors.domain.approvals import Reviewer
from oma_actors.errors import DurableApprovalError

class RacingStore(SqliteStore):
    round = 0
    met = False

    async def get(self, key):
        entry = await super().get(key)
        if not self.met:
            self.met = True
            meeting = Path(sys.argv[2])
            (meeting / f"{self.round}-{sys.argv[3]}").touch()
            deadline = time.monotonic() + 20
            while not (meeting / f"{self.round}-{sys.argv[4]}").exists():
                assert time.monotonic() < deadline, "the rival never read the request"
                await asyncio.sleep(0.002)
        return entry

async def main(path, meeting, me, rival, decision, *requests):
    async with RacingStore(path) as store:
        for index, request in enumerate(requests):
            request_id, request_hash = request.split(":")
            store.round, store.met = index, False
            try:
                record = await decide_approval(
                    store, request_id=request_id, request_hash=request_hash,
                    decision=decision, reviewer=Reviewer(me),
                )
                outcome = record.decision.decision
            except DurableApprovalError as exc:
                outcome = exc.code
            print(json.dumps({"round": index, "outcome": outcome}), flush=True)

asyncio.run(main(*sys.argv[1:]))
"""


async def test_concurrent_approve_and_reject_from_two_processes_one_wins_the_other_is_told(
    tmp_path: Path,
) -> None:
    rounds = 6
    path = tmp_path / "state.db"
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    requests = [tool_request(run_id=f"run-{index}") for index in range(rounds)]
    async with SqliteStore(path) as store:
        ledger = DurableApprovalLedger(store)
        for request in requests:
            await ledger.ensure_request(request)
    pairs = [f"{request.id}:{request.request_hash}" for request in requests]

    racers = {
        decision: await _start(RACER, str(path), str(meeting), who, rival, decision, *pairs)
        for decision, who, rival in (("approve", "alice", "bob"), ("reject", "bob", "alice"))
    }
    outcomes: dict[str, list[str]] = {}
    for decision, process in racers.items():
        out, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, err.decode()
        lines = [json.loads(line) for line in out.decode().splitlines()]
        assert [line["round"] for line in lines] == list(range(rounds))
        outcomes[decision] = [line["outcome"] for line in lines]

    async with SqliteStore(path) as fresh:
        for index, request in enumerate(requests):
            pair = (outcomes["approve"][index], outcomes["reject"][index])
            # Exactly one decision was recorded; the loser was told it lost, not "success".
            assert pair in (("approved", "APPROVAL_CONFLICT"), ("APPROVAL_CONFLICT", "rejected"))
            record = await get_approval_record(fresh, request.id)
            assert record is not None
            assert record.decision is not None
            winner = "approved" if pair[0] == "approved" else "rejected"
            assert record.decision.decision == winner
            assert record.decision.reviewer.id == ("alice" if winner == "approved" else "bob")
