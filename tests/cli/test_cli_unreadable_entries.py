"""One value that cannot be opened never fails a view of the other runs (issue: a wrong-key
writer's entries made ``oma checkpoint list|show`` and ``oma runs list|show`` exit 2)."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from test_cli_delete_scope import request
from test_cli_encryption import OLD, approval, key_file, oma, sealed_file_run

from oma_actors.approvals import DurableApprovalLedger
from oma_actors.journal import EncryptingJournal, JournalEvent, JsonlRunJournal
from oma_actors.stores import EncryptingStore, FileStore, KeyRing

if TYPE_CHECKING:
    from pathlib import Path

OTHER = bytes(range(64, 96))


async def poisoned(tmp_path: Path, *, checkpoints: bool = True, events: bool = True) -> Path:
    """Run ``r1`` sealed under ``k`` in ``tmp_path``, then let a writer with another key (id
    ``x``, not in the reader's ring) add run ``bad``: an approval row, its journal events and,
    with ``checkpoints``, its checkpoint and run record, else a run record of ``r1``, and an
    approval row of ``r1``. Returns the key file of ``k``."""
    async with sealed_file_run(tmp_path, KeyRing({"k": OLD}, active="k")):
        pass
    other = KeyRing({"x": OTHER}, active="x")
    inner = FileStore(tmp_path / "state.json")
    try:
        store = EncryptingStore(inner, other)
        await DurableApprovalLedger(store).ensure_request(approval())
        await DurableApprovalLedger(store).ensure_request(request("r1", "c9"))
        if checkpoints:
            await store.set("__oma_checkpoint__/bad/latest", "{}")
            await store.set("__oma_run__/bad", "{}")
        else:
            await store.set("__oma_run__/r1", "{}")
    finally:
        await inner.aclose()
    if events:
        journal = EncryptingJournal(JsonlRunJournal(tmp_path / "run.jsonl"), other)
        event = JournalEvent(
            seq=1, type="turn/start", run_id="bad", attempt=1, timestamp_unix_ms=1, data={}
        )
        await journal.append([event])
        await journal.close()
    return key_file(tmp_path / "keys", k=OLD)


async def test_listings_show_an_entry_that_does_not_open_as_unreadable(tmp_path: Path) -> None:
    keys = await poisoned(tmp_path)
    store = str(tmp_path / "state.json")

    listed = await asyncio.to_thread(oma, "checkpoint", "list", "--store", store, keys=keys)
    assert listed.returncode == 0, listed.stderr
    assert "completed" in listed.stdout  # r1 is listed all the same
    assert "unreadable __oma_checkpoint__/bad/latest: encrypted entry" in listed.stdout
    as_json = await asyncio.to_thread(
        oma, "checkpoint", "list", "--store", store, "--json", keys=keys
    )
    assert as_json.returncode == 0, as_json.stderr
    found = {row["key"]: row for row in json.loads(as_json.stdout)}
    assert found["__oma_checkpoint__/r1/latest"]["status"] == "completed"
    bad = found["__oma_checkpoint__/bad/latest"]
    assert (bad["status"], bad["run_id"]) == ("unreadable", "")
    assert "'x'" in bad["error"]  # names the key id it was sealed under

    runs = await asyncio.to_thread(oma, "runs", "list", "--store", store, "--json", keys=keys)
    assert runs.returncode == 0, runs.stderr
    rows = {row["run_id"]: row for row in json.loads(runs.stdout)}
    assert rows["r1"]["checkpoint"]["status"] == "completed"
    assert rows["__oma_checkpoint__/bad/latest"]["checkpoint"]["status"] == "unreadable"
    assert rows["bad"]["record"]["status"] == "unreadable"
    assert "encrypted entry '__oma_run__/bad'" in rows["bad"]["record"]["error"]
    table = await asyncio.to_thread(oma, "runs", "list", "--store", store, keys=keys)
    assert table.returncode == 0, table.stderr
    # One line per unreadable value, naming its key and why (as `oma checkpoint list` does).
    assert "unreadable __oma_run__/bad: encrypted entry" in table.stdout
    assert "unreadable __oma_checkpoint__/bad/latest: encrypted entry" in table.stdout


async def test_one_run_s_views_read_none_of_another_run_s_values(tmp_path: Path) -> None:
    keys = await poisoned(tmp_path, checkpoints=False)
    store, log = str(tmp_path / "state.json"), str(tmp_path / "run.jsonl")

    # The only checkpoint is r1's: the default of `checkpoint show` reads no other key's value.
    shown = await asyncio.to_thread(oma, "checkpoint", "show", "--store", store, keys=keys)
    assert shown.returncode == 0, shown.stderr
    assert "r1" in shown.stdout
    # The journal they share holds run bad's events sealed under x: r1's view opens r1's alone.
    for journal in (("--journal", log), ()):
        timeline = await asyncio.to_thread(
            oma, "runs", "show", "r1", "--store", store, "--json", *journal, keys=keys
        )
        assert timeline.returncode == 0, timeline.stderr
        assert json.loads(timeline.stdout)["run_id"] == "r1"
    # Its record does not open: the timeline is drawn, the record line says why.
    text = await asyncio.to_thread(oma, "runs", "show", "r1", "--store", store, keys=keys)
    assert text.returncode == 0, text.stderr
    assert "record: unreadable (encrypted entry '__oma_run__/r1'" in text.stdout


async def test_delete_keeps_what_it_cannot_read_and_says_so(tmp_path: Path) -> None:
    # The delete read the whole store to see whether another run's state names the journal:
    # one value that does not open failed it half done (exit 2, the run's state already gone).
    keys = await poisoned(tmp_path, events=False)
    store, log = str(tmp_path / "state.json"), tmp_path / "run.jsonl"
    deleted = await asyncio.to_thread(oma, "runs", "delete", "r1", "--store", store, keys=keys)
    assert deleted.returncode == 0, deleted.stderr
    # r1's row sealed under x cannot be told r1's for sure (only its metadata says so): kept.
    assert "0 approval row(s) (1 unreadable kept)" in deleted.stdout
    assert (
        f"journal: {log} kept (__oma_checkpoint__/bad/latest cannot be read and may name it)"
        in deleted.stdout
    )
    assert log.exists()


def test_the_cli_s_copies_of_the_reserved_prefixes_are_keyspace_s() -> None:
    from oma_actors import keyspace
    from oma_actors.cli import inspect

    assert inspect.RUN_RECORD_PREFIX == keyspace.RUN_KEY_PREFIX
    assert inspect.HISTORY_PREFIX == keyspace.HISTORY_KEY_PREFIX
