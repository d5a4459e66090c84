"""A journal-first snapshot never restores without its journal (decision D15).

The run charged a card with an ``unsafe`` tool and died before the charge was committed; the
dispatch record of that call is a journal-only save (D10), the snapshot does not have it.
Restored without ``journal=``, the restore opens the journal the snapshot names
(``journalRef``) and the card is not charged again; when it cannot, it raises
``JournalUnavailableError`` before writing anything. OMA's mode (``durable=False``) keeps OMA's
behaviour: its snapshot is the save path, so a restore without the journal is allowed (JR-11).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
from journal_first import RUN_ID, Ledger, crash_image, restore_charging, the_task

from oma_actors import CheckpointError, CheckpointOptions, ConfigurationError, OpenMultiAgent
from oma_actors.errors import JournalDamagedError, JournalUnavailableError
from oma_actors.journal import InMemoryRunJournal, JournalOptions, JsonlRunJournal
from oma_actors.journal.ref import open_journal_ref
from oma_actors.stores import InMemoryStore

UNKNOWN = "TOOL_OUTCOME_UNKNOWN"


def stored(state: Path) -> dict[str, Any]:
    document = json.loads(state.read_bytes())
    [entry] = [e for e in document["entries"] if e["key"] == f"__oma_checkpoint__/{RUN_ID}/latest"]
    return dict(json.loads(entry["value"]))


async def test_restore_without_journal_opens_the_named_one_and_charges_once(
    tmp_path: Path,
) -> None:
    state, path = tmp_path / "state.json", tmp_path / "run.jsonl"
    first = await crash_image(state, path)
    assert first.charges == ["c0", "c1"]
    ref = stored(state)["journalRef"]
    # The stored snapshot is the admission (a task's conversation is journal-only, issue 19):
    # the journal held none of the run yet, so it names no ``through``.
    assert ref == {"kind": "JsonlRunJournal", "path": str(path), "durable": True}

    result, again = await restore_charging(state)
    assert again.charges == []  # c1 was dispatched: never run again, c0 committed: replayed
    assert UNKNOWN in result.task_results["pay"].output
    again_ref = stored(state)["journalRef"]  # the re-save still names its journal
    assert again_ref == {**ref, "through": ANY}
    assert again_ref["through"] > 0
    attempts = {json.loads(line)["attempt"] for line in path.read_text().splitlines()}
    assert attempts == {1, 2}  # the restore journaled into the journal it opened


async def test_a_relative_journal_path_is_named_absolutely_for_a_restore_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The journal was given relative to the run's directory. A restore run from another
    # directory that holds a journal of the same name (another run of this id) must open the
    # run's own: read relative to the restore's directory it folded and appended to the other.
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    for directory in (run_dir, elsewhere):
        directory.mkdir()
    (elsewhere / "run.jsonl").write_text("")  # another run's journal, by the same name
    monkeypatch.chdir(run_dir)
    first = await crash_image(run_dir / "state.json", Path("run.jsonl"))
    assert first.charges == ["c0", "c1"]
    assert stored(run_dir / "state.json")["journalRef"]["path"] == str(run_dir / "run.jsonl")

    monkeypatch.chdir(elsewhere)
    result, again = await restore_charging(run_dir / "state.json")
    assert again.charges == []  # c1's dispatch is in the run's own journal: not charged again
    assert UNKNOWN in result.task_results["pay"].output
    assert (elsewhere / "run.jsonl").read_text() == ""
    lines = (run_dir / "run.jsonl").read_text().splitlines()
    attempts = {json.loads(line)["attempt"] for line in lines}
    assert attempts == {1, 2}


def relative_ref(state: Path) -> None:
    """Rewrite the stored snapshot's journal path as older versions wrote it: as given."""
    document = json.loads(state.read_bytes())
    for entry in document["entries"]:
        if entry["key"] == f"__oma_checkpoint__/{RUN_ID}/latest":
            value = json.loads(entry["value"])
            value["journalRef"]["path"] = Path(value["journalRef"]["path"]).name
            entry["value"] = json.dumps(value, separators=(",", ":"))
    state.write_text(json.dumps(document))


async def test_a_relative_path_written_by_an_older_version_is_the_file_beside_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Versions before paths were made absolute wrote the journal's path as given, relative to
    # the writer's directory. Read from the restoring process's directory, it named another
    # run's journal there (folded and appended to: the run's calls ran again); it is the file
    # beside the store's own.
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    for directory in (run_dir, elsewhere):
        directory.mkdir()
    first = await crash_image(run_dir / "state.json", run_dir / "run.jsonl")
    assert first.charges == ["c0", "c1"]
    relative_ref(run_dir / "state.json")
    assert stored(run_dir / "state.json")["journalRef"]["path"] == "run.jsonl"
    (elsewhere / "run.jsonl").write_text("")  # another run's journal, by the same name
    monkeypatch.chdir(elsewhere)
    result, again = await restore_charging(run_dir / "state.json")
    assert again.charges == []  # c1's dispatch is in the run's own journal: not charged again
    assert UNKNOWN in result.task_results["pay"].output
    assert (elsewhere / "run.jsonl").read_text() == ""
    lines = (run_dir / "run.jsonl").read_text().splitlines()
    attempts = {json.loads(line)["attempt"] for line in lines}
    assert attempts == {1, 2}


def test_a_relative_path_without_a_file_store_to_anchor_it_is_refused() -> None:
    with pytest.raises(JournalUnavailableError) as caught:
        open_journal_ref({"kind": "JsonlRunJournal", "path": "run.jsonl"}, InMemoryStore())
    assert "relative" in caught.value.reason


async def test_restore_without_journal_refuses_a_missing_one_and_writes_nothing(
    tmp_path: Path,
) -> None:
    state, path = tmp_path / "state.json", tmp_path / "run.jsonl"
    await crash_image(state, path)
    path.unlink()
    before = state.read_bytes()
    with pytest.raises(JournalUnavailableError) as caught:
        await restore_charging(state)
    assert isinstance(caught.value, CheckpointError)
    assert caught.value.journal_ref == {
        "kind": "JsonlRunJournal", "path": str(path), "durable": True
    }  # fmt: skip
    assert f"no file at {path}" in str(caught.value)
    assert state.read_bytes() == before  # byte-identical: no lease, no attempt, no snapshot
    assert not path.exists()  # nor was an empty journal created in its place


async def test_a_journal_passed_explicitly_is_the_one_used(tmp_path: Path) -> None:
    state, path = tmp_path / "state.json", tmp_path / "run.jsonl"
    await crash_image(state, path)
    moved = tmp_path / "moved.jsonl"
    path.rename(moved)
    journal = JsonlRunJournal(moved, flush_interval_ms=0)
    result, again = await restore_charging(state, journal=journal)
    await journal.close()
    assert again.charges == []
    assert UNKNOWN in result.task_results["pay"].output


async def test_omas_mode_restores_without_its_journal(tmp_path: Path) -> None:
    state, path = tmp_path / "state.json", tmp_path / "run.jsonl"
    await crash_image(state, path, durable=False)
    assert stored(state)["journalRef"] == {"kind": "JsonlRunJournal", "path": str(path)}
    path.unlink()
    # OMA's mode: the snapshot is the save path and holds the dispatched mark itself.
    result, again = await restore_charging(state)
    assert again.charges == []
    assert UNKNOWN in result.task_results["pay"].output
    assert "journalRef" not in stored(state)  # OMA's v4 re-save without a journal (JR-11)


async def test_an_in_memory_journal_is_never_reopened() -> None:
    store = InMemoryStore()
    journal = InMemoryRunJournal()
    ledger = Ledger()
    result = await OpenMultiAgent().run_tasks(
        ledger.team(), the_task(), checkpoint=CheckpointOptions(store=store, run_id=RUN_ID),
        journal=JournalOptions(journal),
    )  # fmt: skip
    assert result.success
    entry = await store.get(f"__oma_checkpoint__/{RUN_ID}/latest")
    assert entry is not None
    before = entry.value
    with pytest.raises(JournalUnavailableError, match="only in the process that wrote it"):
        await OpenMultiAgent().restore(
            ledger.team(), checkpoint=CheckpointOptions(store=store, run_id=RUN_ID)
        )
    after = await store.get(f"__oma_checkpoint__/{RUN_ID}/latest")
    assert after is not None
    assert after.value == before
    # Given the journal, it restores (a finished run is read back, D4).
    done = await OpenMultiAgent().restore(
        ledger.team(), checkpoint=CheckpointOptions(store=store, run_id=RUN_ID), journal=journal
    )
    assert done.success


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        (None, "names no journal"),
        ({"kind": "JsonlRunJournal"}, "path is missing"),
        ({"kind": "InMemoryRunJournal"}, "only in the process"),
        (
            {"kind": "SqliteRunJournal", "store": "same-database", "table": "j"},
            "not in the database of the store",
        ),
        (
            {"kind": "PostgresRunJournal", "store": "same-database", "table": "j"},
            "not in the database of the store",
        ),
        (
            {"kind": "JsonlRunJournal", "path": "/x.jsonl", "sealed": True},
            "the journal is sealed",
        ),
        ({"kind": "KafkaJournal"}, "unknown journal kind 'KafkaJournal'"),
    ],
)
def test_a_ref_that_cannot_be_opened_is_named(ref: dict[str, Any] | None, reason: str) -> None:
    with pytest.raises(JournalUnavailableError) as caught:
        open_journal_ref(ref)
    assert reason in caught.value.reason
    assert caught.value.journal_ref == ref


@pytest.mark.parametrize("on_damaged", ["refuse", "salvage"])
async def test_an_emptied_journal_is_damaged_not_empty(tmp_path: Path, on_damaged: str) -> None:
    # A missing file reads as an empty journal (JR-04); each unsafe dispatch left a mark beside
    # the journal (``<journal>.marks``, issue 18) naming the seq the journal held, so an emptied
    # one is told apart from a journal that never held the run.
    state, path = tmp_path / "state.json", tmp_path / "run.jsonl"
    await crash_image(state, path)
    marks = marks_beside(path)
    assert [mark["callId"] for mark in marks] == ["c0", "c1"]
    path.write_bytes(b"")
    before = state.read_bytes()
    if on_damaged == "refuse":
        with pytest.raises(JournalDamagedError) as caught:
            await restore_charging(state)
        assert caught.value.seq == marks[-1]["seq"]
        assert "events were lost" in caught.value.reason
        assert state.read_bytes() == before
        assert path.read_bytes() == b""
        return
    result, again = await restore_charging(state, on_damaged="salvage")
    # Salvaged: the marks name c0 and c1 as dispatched, but the turns that issued them were only
    # in the lost events, so the task cannot resume either call: it fails closed (issue 19)
    # rather than asking the model again, and neither call runs again.
    assert again.charges == []
    assert result.task_results["pay"].output.startswith(UNKNOWN)


def marks_beside(path: Path) -> list[dict[str, Any]]:
    """The dispatch marks beside the JSONL journal at ``path``, as plain JSON."""
    return [json.loads(line) for line in Path(f"{path}.marks").read_text().splitlines()]


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


async def test_the_cli_follows_journal_ref_and_shows_the_started_call_dispatched(
    tmp_path: Path,
) -> None:
    state, path = tmp_path / "state.json", tmp_path / "run.jsonl"
    await crash_image(state, path)
    show = await asyncio.to_thread(
        oma, "checkpoint", "show", "--store", str(state), "--run-id", RUN_ID
    )
    assert show.returncode == 0, show.stderr
    assert f"from {path}" in show.stdout  # the journal the snapshot names
    assert "call c1 charge: dispatched" in show.stdout  # its dispatch record is in the tail only
    alone = await asyncio.to_thread(
        oma, "checkpoint", "show", "--store", str(state), "--run-id", RUN_ID, "--no-journal"
    )
    # The stored snapshot is older: the admission, before pay's conversation (issue 19).
    assert "call c0" not in alone.stdout
    assert "call c1" not in alone.stdout

    timeline = await asyncio.to_thread(oma, "runs", "show", RUN_ID, "--store", str(state))
    assert timeline.returncode == 0, timeline.stderr
    assert "from journal + snapshot" in timeline.stdout
    [c1] = [line for line in timeline.stdout.splitlines() if "charge c1" in line]
    # Started, no result, and no run/end of its attempt: the journal alone cannot tell a live
    # attempt from a dead one, so the mark is the fact it holds ("running"), never "pending".
    assert "running" in c1
    assert "pending" not in c1


async def test_salvage_never_reruns_a_committed_idempotent_call_it_cannot_fold(
    tmp_path: Path,
) -> None:
    # c0 (an idempotent tool) committed in the tail only; its tool/result is edited to name a
    # call nobody made, so the tail breaks there and c0's commit cannot fold. Salvaged, c0 is
    # outcome unknown whatever its tool's effect.
    state, path = tmp_path / "state.json", tmp_path / "run.jsonl"
    await crash_image(state, path, effect="idempotent")
    lines = path.read_bytes().splitlines(keepends=True)
    at = [json.loads(line)["type"] for line in lines].index("tool/result")
    lines[at] = lines[at].replace(b'"toolCallId":"c0"', b'"toolCallId":"c9"')
    assert b'"c9"' in lines[at]
    path.write_bytes(b"".join(lines))
    with pytest.raises(JournalDamagedError):
        await restore_charging(state, effect="idempotent")
    result, again = await restore_charging(state, on_damaged="salvage", effect="idempotent")
    # c1 never reached the journal (an idempotent call is recorded with its result): it runs
    # again, the documented window for such tools (C03c); c0 never does.
    assert again.charges == ["c1"]
    assert UNKNOWN in result.task_results["pay"].output


async def test_on_damaged_journal_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="on_damaged_journal"):
        await restore_charging(tmp_path / "state.json", on_damaged="ignore")
    assert not (tmp_path / "state.json").exists()


async def test_a_database_ref_opens_the_journal_of_the_snapshots_own_database(
    tmp_path: Path,
) -> None:
    from oma_actors.journal import SqliteRunJournal
    from oma_actors.stores import SqliteStore

    ref = {"kind": "SqliteRunJournal", "store": "same-database", "table": "oma_kv_journal"}
    async with SqliteStore(tmp_path / "a.db") as store:
        opened = open_journal_ref({**ref, "durable": True}, store)
        assert isinstance(opened, SqliteRunJournal)
        assert opened.path == str(tmp_path / "a.db")
        await opened.close()
        # Another table than the store's own journal: not this database's journal.
        with pytest.raises(JournalUnavailableError):
            open_journal_ref({**ref, "table": "other_journal"}, store)
    with pytest.raises(JournalUnavailableError):
        open_journal_ref(ref, InMemoryStore())


@pytest.mark.crash
def test_the_cli_follows_a_database_journal_ref_after_a_kill(tmp_path: Path) -> None:
    # D15: a journal-first run on SQLite keeps its journal in the store's own database. Killed
    # (SIGKILL) inside its second unsafe charge, the dispatch record is in the journal alone:
    # `oma checkpoint show` and `oma runs show` on the store URI fold it from there, so the
    # call reads dispatched / running, never "not committed" / pending.
    db, ready = tmp_path / "state.db", tmp_path / "ready"
    here = Path(__file__).parent
    child = subprocess.Popen(
        [sys.executable, str(here / "sqlite_crash_child.py"), str(db), str(ready)],
        cwd=here, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(here), *sys.path])},
    )  # fmt: skip
    try:
        for _ in range(600):
            if ready.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), f"the child exited {child.returncode} before charging"
    finally:
        child.kill()
        child.wait()
    store = f"sqlite://{db}"
    with contextlib.closing(sqlite3.connect(db)) as connection:
        [(value,)] = connection.execute(
            "SELECT value FROM oma_kv WHERE key = ?", (f"__oma_checkpoint__/{RUN_ID}/latest",)
        ).fetchall()
    ref = json.loads(value)["journalRef"]
    assert (ref["kind"], ref["durable"]) == ("SqliteRunJournal", True)
    show = oma("checkpoint", "show", "--store", store, "--run-id", RUN_ID)
    assert show.returncode == 0, show.stderr
    assert "call c1 charge: dispatched" in show.stdout
    assert "SqliteRunJournal of this store's database" in show.stdout
    timeline = oma("runs", "show", RUN_ID, "--store", store)
    assert timeline.returncode == 0, timeline.stderr
    assert "from journal + snapshot" in timeline.stdout
    [c1] = [line for line in timeline.stdout.splitlines() if "charge c1" in line]
    assert "running" in c1
    assert "pending" not in c1
