"""Redacting database journals: ``SqliteRunJournal`` / ``PostgresRunJournal`` take ``redact=``.

A ``RedactingStore`` over SQLite or PostgreSQL keeps its own table clean; the run's journal,
in a table of the same database, must be as clean when given ``redact=``: the same rules as
``JsonlRunJournal(redact=...)`` (the built-in ones plus the caller's patterns), applied to each
event's payload before its row is encoded, by every append path, the fenced one included. The
checks read the raw tables, not the journal's own reads.
"""

from __future__ import annotations

import asyncio
import base64
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    ToolContext,
    define_tool,
)
from oma_actors.errors import ConfigurationError
from oma_actors.events import CheckpointSaved, ProgressEvent, ToolCalled
from oma_actors.journal import (
    EncryptingJournal,
    JournalOptions,
    JsonlRunJournal,
    PostgresRunJournal,
    SqliteRunJournal,
)
from oma_actors.journal.event import JournalEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import KeyRing, RedactingStore
from oma_actors.testing import FakeClock, ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from service_kit import FreshStores

    from oma_actors.journal.sql import SqlRunJournal
    from oma_actors.stores.base import ConditionalStore

CANARY = "CANARY-9d2e"
PATTERNS = [rf"{CANARY}[-A-Za-z0-9]*"]
TOKEN = "sk-" + "A1b2C3d4E5f6G7h8J9k0"  # a provider token literal (built-in rule 6)
PASSWORD = "hunter2hunter2"  # only a built-in rule (`password=`) can find it
LEAKS = (CANARY, TOKEN, PASSWORD)


class LookupIn(BaseModel):
    q: str


def team(tool_calls: list[str]) -> Team:
    """Agent ``w``: a lookup with a secret input and output, a tool error quoting a password,
    then an answer holding a token and the canary."""

    async def lookup(args: LookupIn, ctx: ToolContext) -> str:
        tool_calls.append(ctx.tool_call_id or "")
        return f"found {CANARY}-OUT for {args.q}"

    async def boom(args: LookupIn, ctx: ToolContext) -> str:
        tool_calls.append(ctx.tool_call_id or "")
        # After a `;`: the built-in rules (OMA's) read "Error: db ..." as one assignment to
        # the name `Error` up to the next delimiter, and look for no name inside its value.
        raise RuntimeError(f"db refused; password={PASSWORD}")

    def model(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        turn = sum(1 for m in messages if m.role == "assistant")
        if turn == 0:
            return LLMResponse(
                [ToolUseBlock("c1", "lookup", {"q": f"{CANARY}-IN"})], stop_reason="tool_use"
            )
        if turn == 1:
            return LLMResponse([ToolUseBlock("c2", "boom", {"q": "x"})], stop_reason="tool_use")
        return LLMResponse([TextBlock(f"done: {CANARY}-ANSWER and {TOKEN}")])

    tools = [
        define_tool(name="lookup", description="l", input_model=LookupIn, execute=lookup),
        define_tool(name="boom", description="b", input_model=LookupIn, execute=boom),
    ]
    return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(model), tools=tools)])


def task() -> Task:
    return Task("pay", f"pay the invoice {CANARY}-DESC", id="t1", assignee="w")


class Database:
    """One backend under test: its store, a redacting journal in its database, its raw rows."""

    def __init__(self, kind: str, tmp_path: Path, fresh_stores: FreshStores) -> None:
        self.kind = kind
        self._tmp_path = tmp_path
        self._fresh = fresh_stores
        self._dsn = ""
        self.table = ""
        self.store: ConditionalStore

    async def open(self) -> None:
        if self.kind == "sqlite":
            self.store = await self._fresh.sqlite(self._tmp_path / "state.db")
        else:
            self._dsn, self.table = self._fresh.postgres_table()
            self.store = await self._fresh.postgres(self.table)

    def journal(self, redact: Sequence[str | re.Pattern[str]] | None = PATTERNS) -> SqlRunJournal:
        if self.kind == "sqlite":
            return SqliteRunJournal(self._tmp_path / "state.db", redact=redact)
        return PostgresRunJournal(self._dsn, store_table=self.table, redact=redact)

    async def rows(self, table: str) -> list[str]:
        """Every row of ``table`` (``store`` or ``journal``) as raw text."""
        if self.kind == "sqlite":
            name = {"store": "oma_kv", "journal": "oma_kv_journal"}[table]
            with sqlite3.connect(self._tmp_path / "state.db") as db:
                found = db.execute(f"SELECT * FROM {name}").fetchall()
            return [repr(row) for row in found]
        name = self.table + ("_journal" if table == "journal" else "")
        pg = await asyncpg.connect(self._dsn)
        try:
            return [repr(tuple(row)) for row in await pg.fetch(f'SELECT * FROM "{name}"')]
        finally:
            await pg.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def database(
    request: pytest.FixtureRequest, tmp_path: Path, fresh_stores: FreshStores
) -> Database:
    """A fresh store of each backend (``fresh_stores`` drops it, and its journal, after)."""
    db = Database(request.param, tmp_path, fresh_stores)
    await db.open()
    return db


def leaked(rows: list[str]) -> list[str]:
    return [row for row in rows if any(secret in row for secret in LEAKS)]


async def test_a_redacted_run_leaves_no_secret_in_any_journal_row(database: Database) -> None:
    tool_calls: list[str] = []
    store = RedactingStore(database.store, patterns=PATTERNS)
    journal = database.journal()
    try:
        result = await OpenMultiAgent().run_tasks(
            team(tool_calls), [task()],
            checkpoint=CheckpointOptions(store=store, run_id="r1"),
            journal=JournalOptions(journal, durable=True),
        )  # fmt: skip
        assert result.success
        assert tool_calls == ["c1", "c2"]
        events = await journal.read_run("r1")  # every row still reads, keys and all
    finally:
        await journal.close()
    rows = await database.rows("journal")
    assert len(rows) == len(events) > 10
    assert leaked(rows) == []
    assert leaked(await database.rows("store")) == []
    assert sum("[redacted]" in row for row in rows) >= 4
    # What was redacted is the payload: the rows' keys and base fields are as recorded.
    assert {(e.run_id, e.task_id, e.agent_name) for e in events if e.task_id} == {("r1", "t1", "w")}


async def test_a_run_restored_over_a_redacted_tail_completes(database: Database) -> None:
    tool_calls: list[str] = []
    store = RedactingStore(database.store, patterns=PATTERNS)
    opts = CheckpointOptions(store=store, run_id="r2")
    journal = database.journal()
    try:
        holder: list[asyncio.Task[Any]] = []

        called: list[str] = []

        def stop_after_first_call(event: ProgressEvent) -> None:
            # Stopped at the first save after c1 returned: its result is in the journal only.
            if isinstance(event, ToolCalled):
                called.append(event.tool_call_id)
            elif isinstance(event, CheckpointSaved) and called and holder:
                holder[0].cancel()

        holder.append(
            asyncio.ensure_future(
                OpenMultiAgent(on_progress=stop_after_first_call).run_tasks(
                    team(tool_calls),
                    [task()],
                    checkpoint=opts,
                    journal=JournalOptions(journal, durable=True),
                )
            )
        )
        with pytest.raises(asyncio.CancelledError):
            await holder[0]
        restored = await OpenMultiAgent().restore(
            team(tool_calls), checkpoint=opts, journal=JournalOptions(journal, durable=True)
        )
        assert restored.success
        assert tool_calls[-1] == "c2"
    finally:
        await journal.close()
    assert leaked(await database.rows("journal")) == []


def secret_event(run_id: str, seq: int) -> JournalEvent:
    return JournalEvent(
        seq=seq, type="tool/result", run_id=run_id, attempt=1, timestamp_unix_ms=1,
        task_id="t1", agent_name="w",
        data={
            "toolUseId": "c1", "toolName": "lookup",
            "output": f"{CANARY}-OUT password={PASSWORD} {TOKEN}",
            "isError": False, "n": 1.0, "apiKey": "not-even-a-pattern",
        },
    )  # fmt: skip


async def test_every_append_path_redacts(database: Database, tmp_path: Path) -> None:
    journal = database.journal()
    try:
        await journal.append([secret_event("a", 1)])
        await journal.append_now([secret_event("a", 2)])
        await journal.append_nowait([secret_event("a", 3)], now=True)
        lease = await RunLedger(
            MemoryStoreRunStore(database.store), owner="o", lease_ttl=5, clock=FakeClock().unix
        ).acquire("fenced", heartbeat=False)
        await journal.append_fenced([secret_event("fenced", 1)], lease)
        stored = await journal.read_from(0)
    finally:
        await journal.close()
    rows = await database.rows("journal")
    assert len(rows) == 4
    assert leaked(rows) == []
    assert all('"apiKey":"[redacted]"' in row for row in rows)  # a sensitive key, as JSONL does
    assert all('"n":1,' in row for row in rows)  # numbers keep JavaScript's layout
    # The very payload JsonlRunJournal(redact=...) writes for the event.
    jsonl = JsonlRunJournal(tmp_path / "run.jsonl", flush_interval_ms=0, redact=PATTERNS)
    await jsonl.append([secret_event("a", 1)])
    (expected,) = await jsonl.read_from(0)
    await jsonl.close()
    assert expected.data["output"] == "[redacted] password=[redacted]"
    assert [e.data for e in stored] == [expected.data] * 4


async def test_without_redact_the_journal_stores_events_as_they_are(database: Database) -> None:
    journal = database.journal(redact=None)
    try:
        await journal.append([secret_event("a", 1)])
        (stored,) = await journal.read_from(0)
    finally:
        await journal.close()
    assert stored == secret_event("a", 1)
    assert len(leaked(await database.rows("journal"))) == 1


async def test_a_sealed_event_is_stored_as_it_comes(database: Database, tmp_path: Path) -> None:
    """Over a redacting journal an EncryptingJournal's envelopes stay intact: a pattern as
    broad as base64 would otherwise redact the ciphertext, and no event would open again."""
    keys = tmp_path / "keys"
    keys.write_text(f"k1:{base64.b64encode(bytes(range(32))).decode()}\n")
    keys.chmod(0o600)
    sealed = EncryptingJournal(
        database.journal(redact=[r"[A-Za-z0-9+/]{12,}"]), KeyRing.from_file(keys)
    )
    try:
        await sealed.append([secret_event("a", 1)])
        (opened,) = await sealed.read_run("a")
    finally:
        await sealed.close()
    # It opens. (What is under the seal is what EncryptingJournal sealed: it seals before the
    # inner journal sees the event, so the inner journal's rules never reach the plaintext.)
    assert (opened.run_id, opened.seq, sorted(opened.data)) == (
        "a",
        1,
        sorted(secret_event("a", 1).data),
    )
    assert leaked(await database.rows("journal")) == []  # ciphertext only


def test_the_patterns_are_checked_and_the_description_is_unchanged(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="invalid redaction pattern"):
        SqliteRunJournal(tmp_path / "state.db", redact=["("])
    with pytest.raises(ConfigurationError, match="sequence of patterns"):
        PostgresRunJournal("postgresql://u@h/d", redact="secret")
    # As JsonlRunJournal's: the journalRef a restore matches against the store's database.
    plain = SqliteRunJournal(tmp_path / "state.db").describe()
    assert SqliteRunJournal(tmp_path / "state.db", redact=PATTERNS).describe() == plain
