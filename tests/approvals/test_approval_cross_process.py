"""A reviewer decides from another process after the process that asked for review exited."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from approval_helpers import tool_request

from oma_actors.approvals import get_approval_record
from oma_actors.domain.approvals import Reviewer
from oma_actors.stores import FileStore

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
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    assert not err, err.decode()
    return process.returncode, out.decode().strip()


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
