"""EncryptingJournal: payloads sealed at rest, base fields readable, every forgery fails closed."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.errors import ConfigurationError, CorruptStoreError
from oma_actors.events import CheckpointSaveFailed, ProgressEvent
from oma_actors.journal import (
    InMemoryRunJournal,
    JournalEvent,
    JournalOptions,
    JsonlRunJournal,
    verify_run,
)
from oma_actors.journal.encrypting import SEALED_FIELD, EncryptingJournal, _context, open_event
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import FileStore, InMemoryStore
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.keyring import PREFIX, KeyRing
from oma_actors.testing import FailingStore, ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from service_kit import FreshStores

    from oma_actors.journal import RunJournal

SECRET = "acct-4111-1111-1111-1111"
RING = KeyRing({"k1": bytes(range(32))}, active="k1")


class Note(BaseModel):
    text: str


def team_with(effects: list[str], text: str = SECRET, answer: str = f"done with {SECRET}") -> Team:
    """Agent ``w`` calls ``note`` once with ``text`` (each execution's call id goes to
    ``effects``), then answers ``answer``."""

    def one_tool(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if len(messages) == 1:
            return LLMResponse(
                [ToolUseBlock("call-1", "note", {"text": text})], stop_reason="tool_use",
                usage=TokenUsage(1, 1),
            )  # fmt: skip
        return LLMResponse([TextBlock(answer)], usage=TokenUsage(1, 1))

    async def note(args: Note, ctx: ToolContext) -> str:
        effects.append(ctx.tool_call_id)
        return f"noted {args.text}"

    tool = define_tool(name="note", description="n", input_model=Note, execute=note)
    return Team("t", [AgentConfig("w", adapter=ScriptedAdapter(one_tool), tools=[tool])])


async def test_a_durable_run_on_a_sealed_jsonl_journal_keeps_no_plaintext_and_verifies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    journal = EncryptingJournal(JsonlRunJournal(path), RING)
    store = EncryptingStore(FileStore(tmp_path / "state.json"), RING)
    result = await OpenMultiAgent().run_tasks(
        team_with([]), [Task("a", "x", assignee="w")],
        checkpoint=CheckpointOptions(store=store, run_id="j1"),
        journal=JournalOptions(journal, durable=True),
    )  # fmt: skip
    await journal.close()
    assert result.success

    raw = await asyncio.to_thread(path.read_bytes)
    assert SECRET.encode() not in raw
    lines = [json.loads(line) for line in raw.splitlines()]
    # Ordering and bookkeeping stay readable; the payload is one sealed field.
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert all(line["runId"] == "j1" and line[SEALED_FIELD].startswith(PREFIX) for line in lines)

    reader = EncryptingJournal(JsonlRunJournal(path), RING)
    events = await reader.read_from(0)
    assert any(SECRET in json.dumps(event.data) for event in events)
    assert (await verify_run(reader)).ok

    entry = await store.get("__oma_checkpoint__/j1/latest")
    assert entry is not None
    ref = json.loads(entry.value)["journalRef"]
    assert {key: ref[key] for key in ("kind", "path", "sealed")} == {
        "kind": "JsonlRunJournal", "path": str(path), "sealed": True,
    }  # fmt: skip
    assert ref["durable"] is True  # the snapshot depends on it: never restored without it


async def test_a_restore_folds_a_tail_read_through_the_sealed_journal() -> None:
    # As JR-18: the tool's result is only in the journal; the restore must open it to replay it.
    journal, inner = EncryptingJournal(InMemoryRunJournal(), RING), InMemoryStore()
    store = EncryptingStore(inner, RING)
    effects: list[str] = []
    failing = FailingStore(
        store, times=None, exc_factory=lambda: OSError(28, "No space left"),
        predicate=lambda _k, value: isinstance(value, dict) and '"commit"' in json.dumps(value),
    )  # fmt: skip
    stopped = asyncio.Event()

    def observe(event: ProgressEvent) -> None:
        if isinstance(event, CheckpointSaveFailed) and event.boundary == "tool_commit":
            stopped.set()

    options = CheckpointOptions(store=failing, run_id="j1")
    run = asyncio.ensure_future(
        OpenMultiAgent(on_progress=observe).run_tasks(
            team_with(effects), [Task("a", "x", assignee="w", id="task-a")],
            checkpoint=options, journal=JournalOptions(journal, durable=False),
        )
    )  # fmt: skip
    await stopped.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    for _ in range(100):  # the best-effort append lands on its own
        if any(e.type == "tool/result" for e in await journal.read_from(0)):
            break
        await asyncio.sleep(0.01)
    assert effects == ["call-1"]

    again: list[str] = []
    restored = await OpenMultiAgent().restore(
        team_with(again), checkpoint=CheckpointOptions(store=store, run_id="j1"),
        journal=JournalOptions(journal, durable=False),
    )  # fmt: skip
    assert restored.success
    assert again == []  # replayed from the sealed journal, not run again


def event(seq: int, run_id: str = "r1", **data: object) -> JournalEvent:
    return JournalEvent(
        seq=seq, type="assistant/message", run_id=run_id, attempt=1,
        timestamp_unix_ms=1_700_000_000_000 + seq, agent_name="w", data=dict(data),
    )  # fmt: skip


async def stored(events: list[JournalEvent]) -> list[JournalEvent]:
    """The events as the inner journal holds them after a sealed append."""
    inner = InMemoryRunJournal()
    await EncryptingJournal(inner, RING).append(events)
    return await inner.read_from(0)


async def read_forged(events: list[JournalEvent], ring: KeyRing = RING) -> list[JournalEvent]:
    inner = InMemoryRunJournal()
    await inner.append(events)
    return await EncryptingJournal(inner, ring).read_from(0)


async def test_sealed_events_round_trip_over_an_in_memory_journal() -> None:
    appended = [event(1, content=[{"type": "text", "text": SECRET}]), event(2, n=1.5)]
    inner = await stored(appended)
    assert all(set(e.data) == {SEALED_FIELD} for e in inner)
    assert SECRET not in repr(inner)
    assert await read_forged(inner) == appended


def flip_last_byte(envelope: str) -> str:
    head, body = envelope.rsplit(":", 1)
    return f"{head}:{body[:-2]}{'A' if body[-2] != 'A' else 'B'}{body[-1]}"


@pytest.mark.parametrize(
    ("forge", "reason"),
    [
        (lambda a, b: [replace(a, data={SEALED_FIELD: flip_last_byte(a.data[SEALED_FIELD])})],
         "authentication failed"),
        (lambda a, b: [replace(a, data=b.data), replace(b, data=a.data)], "authentication failed"),
        (lambda a, b: [replace(a, run_id="r2")], "authentication failed"),
        (lambda a, b: [replace(a, type="user/message")], "authentication failed"),
        (lambda a, b: [replace(a, agent_name="reviewer")], "authentication failed"),
        (lambda a, b: [replace(a, data={"content": "approved"})], "not sealed"),
        (lambda a, b: [replace(a, data={**a.data, "content": "approved"})], "not sealed"),
    ],
    ids=["flipped", "swapped-seqs", "other-run", "retyped", "reattributed", "plaintext", "extra"],
)  # fmt: skip
async def test_a_forged_event_fails_closed_naming_run_and_seq(forge: object, reason: str) -> None:
    a, b = await stored([event(1, text="one"), event(2, text="two")])
    forged = forge(a, b)  # type: ignore[operator]
    with pytest.raises(CorruptStoreError, match=reason) as caught:
        await read_forged(forged)
    assert "event seq 1" in str(caught.value)
    assert f"run '{forged[0].run_id}'" in str(caught.value)


async def test_a_lost_key_fails_closed_naming_the_key_id() -> None:
    sealed = await stored([event(1, text="one")])
    other = KeyRing({"k2": bytes(32)}, active="k2")
    with pytest.raises(CorruptStoreError, match=r"key id 'k1'.*not in the ring"):
        await read_forged(sealed, other)


async def test_append_now_exists_only_when_the_inner_journal_has_it(tmp_path: Path) -> None:
    assert not hasattr(EncryptingJournal(InMemoryRunJournal(), RING), "append_now")
    journal = EncryptingJournal(JsonlRunJournal(tmp_path / "j.jsonl"), RING)
    await journal.append_now([event(1, text=SECRET)])
    await journal.close()
    assert SECRET.encode() not in (tmp_path / "j.jsonl").read_bytes()
    assert (await read_forged(await journal.inner.read_from(0)))[0].data == {"text": SECRET}


def test_it_refuses_what_is_not_a_journal_or_a_ring() -> None:
    with pytest.raises(ConfigurationError, match="needs a RunJournal"):
        EncryptingJournal(InMemoryStore(), RING)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a KeyRing"):
        EncryptingJournal(InMemoryRunJournal(), b"key")  # type: ignore[arg-type]


async def test_the_journal_contract_holds_through_the_seal_on_every_backend(
    tmp_path: Path, fresh_stores: FreshStores
) -> None:
    # Issue 22 item 2: the wrapper keeps the journal contract over the database journals too
    # (order, per-run reads, duplicates refused, close), and the rows hold no plaintext.
    from oma_actors.journal import PostgresRunJournal, SqliteRunJournal
    from oma_actors.testing.journal_contract import JournalHooks, check_run_journal

    def reopen(journal: RunJournal) -> RunJournal:
        assert isinstance(journal, EncryptingJournal)
        assert isinstance(journal.inner, SqliteRunJournal)
        return EncryptingJournal(SqliteRunJournal(journal.inner.path), RING)

    await check_run_journal(lambda: EncryptingJournal(InMemoryRunJournal(), RING))
    await check_run_journal(
        lambda: EncryptingJournal(SqliteRunJournal(tmp_path / f"{uuid.uuid4().hex}.db"), RING),
        JournalHooks(keyed=True, reopen=reopen),
    )
    dsn, table = fresh_stores.postgres_table()
    sealed = EncryptingJournal(PostgresRunJournal(dsn, store_table=table), RING)
    try:
        await sealed.append([event(1, secret=SECRET)])
        [back] = await sealed.read_from(0)
        assert back.data["secret"] == SECRET
        raw = await sealed.inner.read_from(0)
        assert SECRET not in json.dumps([e.data for e in raw])
    finally:
        await sealed.close()


def test_an_authentic_payload_that_is_no_object_is_refused() -> None:
    # Only a writer holding the key can seal it; still the reader takes no list for a payload.
    plain = event(1)
    envelope = RING.seal(b"[1, 2]", _context(plain))
    sealed = replace(plain, data={SEALED_FIELD: envelope})
    with pytest.raises(CorruptStoreError, match="the sealed payload is not a JSON object"):
        open_event(sealed, RING, journal="j.jsonl")


def test_a_payload_holding_a_lone_surrogate_is_sealed_and_opens_as_itself() -> None:
    # A tool's output may hold a lone surrogate; the payload's UTF-8 encoding raised a bare
    # UnicodeEncodeError and the sealed journal's run failed.
    from oma_actors.journal import JournalEvent
    from oma_actors.journal.encrypting import seal_event

    event = JournalEvent(
        seq=1, type="tool/result", run_id="r", attempt=1, timestamp_unix_ms=1,
        data={"output": "a\ud800b", "nested": ["\udfff"]},
    )  # fmt: skip
    sealed = seal_event(event, RING)
    assert set(sealed.data) == {SEALED_FIELD}
    assert open_event(sealed, RING, journal="j").data == event.data


@pytest.mark.parametrize("durable", [True, False], ids=["journal-first", "oma-mode"])
async def test_a_plain_journal_beside_a_sealed_store_is_refused_before_anything(
    tmp_path: Path, durable: bool
) -> None:
    """Its events would keep in clear what the store seals; nothing is written."""
    path = tmp_path / "run.jsonl"
    journal = JsonlRunJournal(path)
    inner = FileStore(tmp_path / "state.json")
    store = EncryptingStore(inner, RING)
    effects: list[str] = []
    orchestrator = OpenMultiAgent()
    try:
        with pytest.raises(ConfigurationError, match="EncryptingJournal"):
            await orchestrator.run_tasks(
                team_with(effects), [Task("a", "x", assignee="w")],
                checkpoint=CheckpointOptions(store=store, run_id="j1"),
                journal=JournalOptions(journal, durable=durable),
            )  # fmt: skip
        with pytest.raises(ConfigurationError, match="EncryptingJournal"):
            await orchestrator.restore(
                team_with(effects), checkpoint=CheckpointOptions(store=store, run_id="j1"),
                journal=journal,
            )  # fmt: skip
    finally:
        await journal.close()
    assert effects == []
    assert not path.exists() or path.read_bytes() == b""
    assert await inner.list() == []
    # A sealed journal, or one that keeps nothing at rest, is taken.
    for beside in (EncryptingJournal(JsonlRunJournal(path), RING), InMemoryRunJournal()):
        result = await OpenMultiAgent().run_tasks(
            team_with(effects), [Task("a", "x", assignee="w")],
            checkpoint=CheckpointOptions(store=store, run_id=f"ok-{id(beside)}"),
            journal=JournalOptions(beside, durable=durable),
        )  # fmt: skip
        await beside.close()
        assert result.success
