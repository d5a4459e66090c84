"""``oma keys rotate`` and ``OMA_ENCRYPTION_KEYS``: the CLI on encrypted stores and journals."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors.approvals import (
    DurableApprovalLedger,
    create_approval_request,
    tool_call_content,
)
from oma_actors.cli.keys_cmd import rotate
from oma_actors.journal import EncryptingJournal, JournalEvent, JsonlRunJournal
from oma_actors.stores import EncryptingStore, FileStore, InMemoryStore, KeyRing
from oma_actors.stores.keyring import PREFIX
from oma_actors.testing.forwarding import ForwardingStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from service_kit import FreshStores

    from oma_actors.approvals import ApprovalRequest

OLD = bytes(range(32))
NEW = bytes(range(32, 64))
SECRET = "wire-to-DE89370400440532013000"


def approval() -> ApprovalRequest:
    content = tool_call_content(
        tool_name="charge", raw_input={"iban": SECRET}, input={"iban": SECRET},
        agent_name="worker", task_id="t1", tool_call_id="call-1",
    )  # fmt: skip
    return create_approval_request(
        run_id="r", scope="tool_call", boundary="t1:call-1", content=content, reason="spend"
    )


def oma(*args: str, keys: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path.cwd())}
    if keys is not None:
        env["OMA_ENCRYPTION_KEYS"] = str(keys)
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=90, env=env, check=False,
    )  # fmt: skip


def key_file(path: Path, **keys: bytes) -> Path:
    path.write_text("".join(f"{kid}:{base64.b64encode(k).decode()}\n" for kid, k in keys.items()))
    os.chmod(path, 0o600)
    return path


async def seed(path: Path, ring: KeyRing, values: Mapping[str, str]) -> None:
    store = FileStore(path)
    try:
        for key, value in values.items():
            await EncryptingStore(store, ring).set(key, value, {"namespace": "test"})
    finally:
        await store.aclose()


async def raw_values(path: Path) -> dict[str, Any]:
    store = FileStore(path)
    try:
        return {entry.key: entry.value for entry in await store.list()}
    finally:
        await store.aclose()


async def test_rotate_reseals_every_value_so_the_old_key_can_go(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    await seed(state, KeyRing({"old": OLD}, active="old"), {"a": SECRET, "b": "two"})
    keys = key_file(tmp_path / "keys", new=NEW, old=OLD)

    done = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(state), "--keys", str(keys)
    )
    assert done.returncode == 0, done.stderr
    assert "re-sealed 2 under 'new'" in done.stdout  # values only: the key proof is no value
    assert all(v.startswith(PREFIX + "new:") for v in (await raw_values(state)).values())
    assert sorted(await raw_values(state)) == ["a", "b"]  # the retired id's key proof went too

    only_new = EncryptingStore(FileStore(state), KeyRing({"new": NEW}, active="new"))
    assert {e.key: e.value for e in await only_new.list()} == {"a": SECRET, "b": "two"}
    assert (await only_new.get("a")) is not None
    assert (await only_new.inner.get("a")).metadata == {"namespace": "test"}  # type: ignore[union-attr]
    again = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(state), "--keys", str(keys)
    )
    assert "re-sealed 0 under 'new'; already under it 2" in again.stdout


async def test_rotate_leaves_what_it_cannot_open_and_exits_1(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    await seed(state, KeyRing({"lost": OLD}, active="lost"), {"a": SECRET})
    store = FileStore(state)
    await store.set("plain", "not sealed")
    await store.aclose()
    before = await raw_values(state)
    keys = key_file(tmp_path / "keys", new=NEW)
    done = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(state), "--keys", str(keys)
    )
    assert done.returncode == 1
    assert "left 'a': sealed under key id 'lost'" in done.stdout
    assert "left 'plain': the value is not sealed" in done.stdout
    assert await raw_values(state) == before  # nothing durable touched


class WriterRacing(ForwardingStore):
    """A writer that changes ``key`` right before the rotation's first compare-and-set lands."""

    def __init__(self, inner: InMemoryStore, writer: EncryptingStore, key: str) -> None:
        super().__init__(inner)
        self.writer, self.key, self.raced = writer, key, False

    async def _compare_and_set(
        self, key: str, expected: str | None, value: str, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        if key == self.key and not self.raced:
            self.raced = True
            await self.writer.set(key, "written meanwhile")
        return await super()._compare_and_set(key, expected, value, metadata)


async def test_rotate_never_overwrites_a_concurrent_write() -> None:
    inner = InMemoryStore()
    old_ring = KeyRing({"old": OLD}, active="old")
    await EncryptingStore(inner, old_ring).set("k", "before")
    racing = WriterRacing(inner, EncryptingStore(inner, old_ring), "k")
    ring = KeyRing({"new": NEW, "old": OLD}, active="new")
    done = await rotate(racing, ring)  # type: ignore[arg-type]
    assert (done.resealed, done.raced, done.left) == (1, 1, ())
    entry = await EncryptingStore(inner, KeyRing({"new": NEW}, active="new")).get("k")
    assert entry is not None
    assert entry.value == "written meanwhile"


async def test_the_cli_reads_encrypted_stores_and_journals_with_the_env_keys(
    tmp_path: Path,
) -> None:
    ring = KeyRing({"k": OLD}, active="k")
    keys = key_file(tmp_path / "keys", k=OLD)
    path = tmp_path / "run.jsonl"
    journal = EncryptingJournal(JsonlRunJournal(path), ring)
    await journal.append(
        [
            JournalEvent(
                seq=seq,
                type="turn/start",
                run_id="r",
                attempt=1,
                timestamp_unix_ms=seq,
                data={"turn": seq, "note": SECRET},
            )
            for seq in (1, 2)
        ]
    )
    await journal.close()
    assert SECRET not in path.read_text()
    verified = await asyncio.to_thread(oma, "verify", str(path), "--json", keys=keys)
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["stats"]["events"] == 2
    keyless = await asyncio.to_thread(oma, "verify", str(path))
    assert keyless.returncode == 2
    assert "is sealed" in keyless.stderr
    forged = path.read_text().replace('"attempt":1', '"attempt":2', 1)
    path.write_text(forged)
    refused = await asyncio.to_thread(oma, "verify", str(path), keys=keys)
    assert refused.returncode == 2
    assert "CorruptStoreError" in refused.stderr
    assert "event seq 1" in refused.stderr

    state = tmp_path / "state.json"
    store = FileStore(state)
    await DurableApprovalLedger(EncryptingStore(store, ring)).ensure_request(approval())
    await store.aclose()
    assert SECRET not in state.read_text()
    listing = ("approvals", "list", "--store", str(state), "--json")
    shown = await asyncio.to_thread(oma, *listing, keys=keys)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)[0]["run_id"] == "r"
    unsealed = await asyncio.to_thread(oma, *listing)  # no keys: envelopes are not approvals
    assert unsealed.returncode != 0
    bad_keys = key_file(tmp_path / "bad", k=OLD)
    os.chmod(bad_keys, 0o644)
    refused = await asyncio.to_thread(oma, *listing, keys=bad_keys)
    assert refused.returncode == 2
    assert "accessible by other users" in refused.stderr


async def test_rotate_of_a_store_that_is_not_there_creates_none(tmp_path: Path) -> None:
    # A mistyped path must not become a new empty store "rotated" without a word.
    keys = key_file(tmp_path / "keys", new=NEW)
    absent = tmp_path / "mistyped.json"
    done = await asyncio.to_thread(
        oma, "keys", "rotate", "--store", str(absent), "--keys", str(keys)
    )
    assert done.returncode == 2
    assert f"no store file at {absent}" in done.stdout + done.stderr
    assert not absent.exists()


async def test_history_fork_and_delete_open_a_sealed_run_with_the_env_keys(tmp_path: Path) -> None:
    # ``oma runs history|fork|delete`` read and write through OMA_ENCRYPTION_KEYS like every
    # other command: the history opens the sealed journal its snapshot names, the fork writes
    # its child sealed, and the delete keeps the journal file the child depends on.
    ring = KeyRing({"k": OLD}, active="k")
    keys = key_file(tmp_path / "keys", k=OLD)
    state, log = tmp_path / "state.json", tmp_path / "run.jsonl"
    async with sealed_file_run(tmp_path, ring):
        pass

    unkeyed = oma("runs", "history", "r1", "--store", str(state))
    assert unkeyed.returncode == 2
    assert "set OMA_ENCRYPTION_KEYS" in unkeyed.stderr  # the CLI's way to give the keys
    listed = oma("runs", "history", "r1", "--store", str(state), "--json", keys=keys)
    assert listed.returncode == 0, listed.stderr
    commit = next(p for p in json.loads(listed.stdout) if p["boundary"] == "tool_commit")
    forked = oma(
        "runs", "fork", "r1", "--at", str(commit["seq"]), "--as", "r2", "--store", str(state),
        keys=keys,
    )  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    child = (await raw_values(state))["__oma_checkpoint__/r2/latest"]
    assert child.startswith(PREFIX)
    assert SECRET not in child
    deleted = oma("runs", "delete", "r1", "--store", str(state), keys=keys)
    assert deleted.returncode == 0, deleted.stderr
    assert f"journal: {log} kept (another run's state names it)" in deleted.stdout
    assert log.exists()


@contextlib.asynccontextmanager
async def sealed_file_run(tmp_path: Path, ring: KeyRing) -> AsyncIterator[EncryptingStore]:
    """Run ``r1`` journal-first on a sealed ``state.json`` beside a sealed ``run.jsonl`` in
    ``tmp_path``; the sealed store is yielded, and closed (its file lock given back) after."""
    inner = FileStore(tmp_path / "state.json")
    try:
        store = EncryptingStore(inner, ring)
        journal = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0)
        await _sealed_run(store, EncryptingJournal(journal, ring))
        yield store
    finally:
        await inner.aclose()


async def _sealed_run(store: EncryptingStore, journal: EncryptingJournal) -> None:
    from test_cli_history import Empty, answer

    from oma_actors import (
        AgentConfig,
        CheckpointOptions,
        JournalOptions,
        OpenMultiAgent,
        Task,
        Team,
        ToolContext,
        define_tool,
    )
    from oma_actors.testing import ScriptedAdapter

    async def echo(args: Empty, ctx: ToolContext) -> str:
        return SECRET

    tool = define_tool(name="echo", description="e", input_model=Empty, execute=echo)
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(answer), tools=[tool])])
    try:
        result = await OpenMultiAgent().run_tasks(
            team, [Task("a", "x", assignee="w", id="t0")],
            checkpoint=CheckpointOptions(store=store, run_id="r1"),
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
    finally:
        await journal.close()
    assert result.success


async def test_rotate_lists_the_journals_still_sealed_under_an_old_key(tmp_path: Path) -> None:
    # A journal is not re-sealed: the rotation must say which journals still need the old key
    # (exit 1), or the old key is dropped and the run can no longer be restored or shown.
    from oma_actors.journal import SqliteRunJournal
    from oma_actors.stores import SqliteStore

    ring = KeyRing({"old": OLD}, active="old")
    state, log = tmp_path / "state.json", tmp_path / "run.jsonl"
    async with sealed_file_run(tmp_path, ring):
        pass
    database = tmp_path / "state.db"
    sqlite = SqliteStore(database)
    try:
        await _sealed_run(
            EncryptingStore(sqlite, ring), EncryptingJournal(SqliteRunJournal(database), ring)
        )
    finally:
        await sqlite.aclose()
    keys = key_file(tmp_path / "keys", new=NEW, old=OLD)

    for store, journal in ((str(state), str(log)), (f"sqlite:///{database}", "journal in")):
        done = await asyncio.to_thread(oma, "keys", "rotate", "--store", store, "--keys", str(keys))
        assert done.returncode == 1, (done.stdout, done.stderr)
        [line] = [line for line in done.stdout.splitlines() if journal in line]
        assert "journal events are not re-sealed" in line
        assert "under 'old'; keep those keys" in line
        assert "left 1" in done.stdout  # every store value was re-sealed, the journal left


async def test_no_command_prints_a_postgres_password(
    tmp_path: Path, fresh_stores: FreshStores
) -> None:
    # README: an error names the store, never its password. The test server trusts every
    # connection, so the password in the URI is carried and never checked.
    from oma_actors import open_store
    from oma_actors.journal import open_journal

    dsn, table = fresh_stores.postgres_table()
    uri = f"{dsn.replace('postgres@', 'postgres:hunter2@', 1)}?table={table}"
    assert "hunter2" in uri
    ring = KeyRing({"old": OLD}, active="old")
    async with open_store(uri) as store:
        journal = EncryptingJournal(open_journal(uri), ring)
        await _sealed_run(EncryptingStore(store, ring), journal)
        await DurableApprovalLedger(EncryptingStore(store, ring)).ensure_request(approval())
    keys = key_file(tmp_path / "keys", new=NEW, old=OLD)
    rotated = await asyncio.to_thread(oma, "keys", "rotate", "--store", uri, "--keys", str(keys))
    assert rotated.returncode == 1, rotated.stderr  # the database journal left under 'old'
    assert "journal in postgresql://postgres:***@" in rotated.stdout
    missing = await asyncio.to_thread(
        oma, "checkpoint", "show", "--run-id", "nosuch", "--store", uri, keys=keys
    )
    assert missing.returncode == 2
    assert "no checkpoint for run 'nosuch' in postgresql://postgres:***@" in missing.stderr
    listed = await asyncio.to_thread(oma, "approvals", "list", "--store", uri, keys=keys)
    [request_id] = [word for word in listed.stdout.split() if word.startswith("apr_")][:1]
    shown = await asyncio.to_thread(oma, "approvals", "show", request_id, "--store", uri, keys=keys)
    assert "--store postgresql://postgres:***@" in shown.stdout, shown.stdout
    for done in (rotated, missing, listed, shown):
        assert "hunter2" not in done.stdout + done.stderr


async def test_a_sealed_store_read_without_the_keys_says_so_not_damage(tmp_path: Path) -> None:
    # Without OMA_ENCRYPTION_KEYS every value reads as text that is not JSON: the error must
    # say the store is sealed (and how to give the keys), not suggest damage or tampering.
    ring = KeyRing({"k": OLD}, active="k")
    state = tmp_path / "state.json"
    async with sealed_file_run(tmp_path, ring) as store:
        await DurableApprovalLedger(store).ensure_request(approval())
    for args in (("checkpoint", "show", "--run-id", "r1"), ("approvals", "list")):
        done = await asyncio.to_thread(oma, *args, "--store", str(state))
        assert done.returncode == 2, (args, done.stdout)
        assert "it is sealed" in done.stderr, done.stderr
        assert "set OMA_ENCRYPTION_KEYS" in done.stderr


def test_each_reader_of_a_stored_value_names_a_sealed_one_as_sealed() -> None:
    from oma_actors.approvals.records import parse_record
    from oma_actors.checkpoint import decode
    from oma_actors.errors import CheckpointError, DurableApprovalError, LeaseError
    from oma_actors.runs.record import RunRecord

    sealed = PREFIX + "k:AAAA"
    for read, error in (
        (lambda: decode(sealed, key="__oma_checkpoint__/r/latest"), CheckpointError),
        (lambda: parse_record(sealed, "apr_1"), DurableApprovalError),
        (lambda: RunRecord.parse(sealed, run_id="r"), LeaseError),
    ):
        with pytest.raises(error, match="it is sealed"):
            read()
    with pytest.raises(CheckpointError) as plain:
        decode("{not json", key="k")
    assert "sealed" not in str(plain.value)
