"""D11: a fenced snapshot and the run record's move to it are ONE store operation.

OMA moves the record first and writes the snapshot after (RS-12); a crash between the two
leaves a record pointing at a snapshot that was never written. The child dies (``os._exit``)
right after the first write that moved the record: the snapshot it names must be stored.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from fenced_batch_child import CRASH_EXIT

from oma_actors.checkpoint import Checkpoint
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import SqliteStore

CHILD = Path(__file__).with_name("fenced_batch_child.py")


async def test_a_crash_right_after_the_record_moved_finds_the_snapshot_it_names(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=Path.cwd(),
    )  # fmt: skip
    out, err = await asyncio.wait_for(child.communicate(), 120)
    assert child.returncode == CRASH_EXIT, (out + err).decode()
    async with SqliteStore(path) as store:
        record = await RunLedger(MemoryStoreRunStore(store)).get("r1")
        snapshot = await Checkpoint(store, run_id="r1").load_latest()
    assert record is not None
    assert record.checkpoint_ref is not None
    assert snapshot is not None, "the record names a checkpoint that was never written"
    assert record.checkpoint_ref["savedAt"] == snapshot.created_at
    assert record.checkpoint_ref["key"] == "__oma_checkpoint__/r1/latest"
