"""A lone surrogate (``"\\ud800"``: a string Python and JavaScript both allow, realistic in a tool
output or a model's text) on the database stores, SQLite and PostgreSQL.

The JSON text we write (a snapshot, its messages, an entry's metadata) escapes it as
``JSON.stringify`` does, so every checkpoint save can be stored and reads back the same value; a
crashed run restores and replays its committed call instead of running it again. A key or value
the caller gives holding one is refused with a ``StoreError`` naming the entry, and nothing of
the write is stored (a database's UTF-8 text cannot hold it).

Run as a script (``python test_store_lone_surrogates.py DB LEDGER MODE``) this module is the
child the crash test kills: it runs the task until its second tool call, which exits the
process (``os._exit``) after the first call's result was committed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from oma_actors.errors import StoreError
from oma_actors.journal import JournalOptions, PostgresRunJournal, SqliteRunJournal, verify_run
from oma_actors.jsontext import compact_text, escape_lone_surrogates
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import SqliteStore
from oma_actors.stores.base import Expect, Put, Remove
from oma_actors.stores.postgres import PostgresStore
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Sequence

    from service_kit import FreshStores

LONE = "page lone[\ud800] low[\udfff] pair[\U0001d11e] end"
"""A tool output: a lone high and a lone low surrogate, and a real astral character."""
RUN_ID = "lone-1"


@pytest.fixture(params=["sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, fresh_stores: FreshStores
) -> SqliteStore | PostgresStore:
    """A fresh SQLite or PostgreSQL store (PostgreSQL skips locally, fails in CI, when down)."""
    if request.param == "sqlite":
        return await fresh_stores.sqlite()
    return await fresh_stores.postgres()


# --- the JSON text we write -------------------------------------------------------------------


def test_compact_text_escapes_a_lone_surrogate_as_json_stringify_does() -> None:
    value = {"a": "x\ud800y", "b": ["\udfff", 1.5], "c": "\U0001d11e"}
    text = compact_text(value)
    assert text == '{"a":"x\\ud800y","b":["\\udfff",1.5],"c":"\U0001d11e"}'
    assert json.loads(text) == value
    plain = {"a": "é", "n": [1, None, True]}  # orjson's text, taken as it is
    assert compact_text(plain) == json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
    ascii_text = '{"a":1}'
    assert escape_lone_surrogates(ascii_text) is ascii_text


def test_compact_text_is_node_json_stringify_byte_for_byte() -> None:
    from service_kit import require_executable

    node = require_executable("node")
    value = {"lone": LONE, "keys": {"k\udc00": ["\ud83d", "\ude00x", "é\u2028"]}, "n": [1, None]}
    # JavaScript gets the same UTF-16 string through an escaped (ASCII) JSON text.
    script = "process.stdout.write(JSON.stringify(JSON.parse(process.argv[1])))"
    done = subprocess.run(
        [node, "-e", script, json.dumps(value)], capture_output=True, check=True, timeout=30
    )
    assert compact_text(value).encode() == done.stdout


# --- entries on the database stores -----------------------------------------------------------


async def test_metadata_with_a_lone_surrogate_round_trips(
    store: SqliteStore | PostgresStore,
) -> None:
    metadata = {"note": "a\ud800b", "nested": {"k\udfff": ["\udc00"]}, "n": 1.5}
    await store.set("a", "1", metadata)
    assert await store.apply([], [Put("b", "2", metadata)])
    assert await store.compare_and_set("c", None, "3", metadata)
    for key in ("a", "b", "c"):
        entry = await store.get(key)
        assert entry is not None
        assert entry.metadata == metadata
    assert [entry.metadata for entry in await store.list()] == [metadata] * 3


@pytest.mark.parametrize("where", ["set", "set_with_expiry", "compare_and_set", "apply"])
async def test_a_value_with_a_lone_surrogate_is_refused_naming_the_entry(
    store: SqliteStore | PostgresStore, where: str
) -> None:
    await store.set("k", "before", {"m": 1})
    bad = "tool said \ud800"
    writes: dict[str, Callable[[], Awaitable[object]]] = {
        "set": lambda: store.set("k", bad),
        "set_with_expiry": lambda: store.set_with_expiry("k", bad, 3),
        "compare_and_set": lambda: store.compare_and_set("k", "before", bad),
        # The first write of the batch is fine: it is rolled back with the rest.
        "apply": lambda: store.apply([Expect("k", "before")], [Put("other", "x"), Put("k", bad)]),
    }
    write = writes[where]()
    with pytest.raises(StoreError, match=r"the value of entry 'k' holds a lone surrogate"):
        await write
    entry = await store.get("k")
    assert entry is not None
    assert (entry.value, entry.metadata) == ("before", {"m": 1})
    assert [entry.key for entry in await store.list()] == ["k"]
    # The store goes on working.
    await store.set("k", "after")
    assert (await store.get("k")) is not None


async def test_a_key_with_a_lone_surrogate_is_refused_naming_it(
    store: SqliteStore | PostgresStore,
) -> None:
    await store.set("k", "v")
    with pytest.raises(StoreError, match=r"the key of entry 'x\\udc00' holds a lone surrogate"):
        await store.set("x\udc00", "v")
    with pytest.raises(StoreError, match=r"the key of entry 'x\\udc00'"):
        await store.apply([], [Put("k", "w"), Remove("x\udc00")])
    with pytest.raises(StoreError, match=r"the key of entry 'x\\udc00'"):
        await store.apply([Expect("x\udc00", None)], [Put("k", "w")])
    with pytest.raises(StoreError, match=r"the key of entry 'x\\udc00'"):
        await store.delete("x\udc00")
    entry = await store.get("k")
    assert entry is not None
    assert entry.value == "v"


@pytest.mark.parametrize("journaled", [False, True], ids=["oma", "journal-first"])
async def test_every_save_of_a_run_with_a_lone_surrogate_is_stored(
    store: SqliteStore | PostgresStore, journaled: bool
) -> None:
    # Before: every checkpoint save failed ("nothing durable was saved") on both stores.
    ledger: list[str] = []
    journal = _journal_of(store) if journaled else None
    try:
        result = await OpenMultiAgent().run_tasks(
            _team(ledger, crash=False),
            _tasks(),
            checkpoint=CheckpointOptions(store=store, run_id=RUN_ID),
            journal=JournalOptions(journal) if journal is not None else None,
        )
        if journal is not None:
            # The journal's rows hold the escapes too, and read back the same values.
            verdict = await verify_run(journal)
            assert verdict.ok, verdict.failures
            outputs = [
                event.data["result"]["content"]
                for event in await journal.read_run(RUN_ID)
                if event.type == "tool/result"
            ]
            assert LONE in outputs
    finally:
        if journal is not None:
            await journal.close()
            await _drop_marks(store)
    assert result.success, result.status
    assert result.status.message is None
    assert ledger == ["fetch c0", "crash c1"]
    latest = await store.get(f"__oma_checkpoint__/{RUN_ID}/latest")
    assert latest is not None
    assert "lone[\\ud800] low[\\udfff]" in latest.value
    raw = json.loads(latest.value)
    [task] = raw["queue"]["tasks"]
    assert task["title"] == "read \ud800"
    assert task["metadata"] == {"note": "meta \udfff"}
    # The tool output, in the conversation (and, without a journal, in the call's record).
    assert LONE in set(_strings(raw["completedTaskResults"]))


def _strings(value: object) -> Iterator[str]:
    """Every string of a parsed JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _journal_of(store: SqliteStore | PostgresStore) -> SqliteRunJournal | PostgresRunJournal:
    """The run journal in ``store``'s own database (D15)."""
    if isinstance(store, SqliteStore):
        return SqliteRunJournal(store.path)
    return PostgresRunJournal(store.dsn, store_table=store.table)


async def _drop_marks(store: SqliteStore | PostgresStore) -> None:
    """Drop a PostgreSQL journal's marks table (``fresh_stores`` drops the store's and the
    journal's own)."""
    if isinstance(store, PostgresStore):
        import asyncpg

        connection = await asyncpg.connect(store.dsn)
        try:
            await connection.execute(f'DROP TABLE IF EXISTS "{store.table}_journal_marks"')
        finally:
            await connection.close()


# --- a real crash, then a restore, on SQLite --------------------------------------------------


class _Url(BaseModel):
    url: str


def _team(ledger: list[str] | Path, *, crash: bool) -> Team:
    """``fetch`` returns ``LONE``; ``crash`` exits the process when ``crash`` (the child)."""

    def record(line: str) -> None:
        if isinstance(ledger, list):
            ledger.append(line)
            return
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, f"{line}\n".encode())
        os.close(fd)

    async def fetch(args: _Url, ctx: ToolContext) -> str:
        record(f"fetch {ctx.tool_call_id}")
        return LONE

    async def die(args: _Url, ctx: ToolContext) -> str:
        record(f"crash {ctx.tool_call_id}")
        if crash:
            os._exit(137)  # a real crash: the first call's result is committed by now
        return "survived"

    tools = [
        define_tool(name="fetch", description="f", input_model=_Url, execute=fetch),
        define_tool(name="crash", description="c", input_model=_Url, execute=die),
    ]
    agent = AgentConfig("w", adapter=ScriptedAdapter(_script), tools=tools, max_turns=6)
    return Team("t", [agent])


def _script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    n = sum(1 for m in messages if m.role == "assistant")
    if n == 0:
        call = ToolUseBlock("c0", "fetch", {"url": "u\ud800"})
        return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))
    if n == 1:
        return LLMResponse(
            [TextBlock("thinking \udfff"), ToolUseBlock("c1", "crash", {"url": "v"})],
            stop_reason="tool_use",
            usage=TokenUsage(1, 1),
        )
    seen = [
        str(getattr(block, "content", ""))
        for message in messages
        for block in message.content
        if getattr(block, "type", "") == "tool_result"
    ]
    return LLMResponse([TextBlock("saw " + " | ".join(seen))], usage=TokenUsage(1, 1))


def _tasks() -> list[Task]:
    return [Task("read \ud800", "read it", id="t1", assignee="w", metadata={"note": "meta \udfff"})]


def _options(store: SqliteStore, db: Path, mode: str) -> dict[str, Any]:
    journal = JournalOptions(SqliteRunJournal(db)) if mode == "journal-first" else None
    return {"checkpoint": CheckpointOptions(store=store, run_id=RUN_ID), "journal": journal}


async def _child(db: Path, ledger: Path, mode: str) -> None:
    async with SqliteStore(db) as store:
        await OpenMultiAgent().run_tasks(
            _team(ledger, crash=True), _tasks(), **_options(store, db, mode)
        )
    raise SystemExit("the crash tool did not crash the run")


@pytest.mark.crash
@pytest.mark.parametrize("mode", ["journal-first", "oma"])
async def test_a_crashed_run_restores_and_replays_the_committed_call(
    tmp_path: Path, mode: str
) -> None:
    db, ledger = tmp_path / "state.db", tmp_path / "ledger"
    here = Path(__file__)
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(here), str(db), str(ledger), mode,
        stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == 137, stderr.decode(errors="replace")
    assert b"checkpoint save" not in stderr, stderr.decode(errors="replace")
    assert ledger.read_text().split("\n") == ["fetch c0", "crash c1", ""]

    async with SqliteStore(db) as store:
        options = _options(store, db, mode)
        try:
            result = await OpenMultiAgent().restore(_team(ledger, crash=False), _tasks(), **options)
        finally:
            if options["journal"] is not None:
                await options["journal"].journal.close()
    assert result.success, result.status
    # fetch (committed before the crash) is replayed, never run again; the crashed call reruns.
    assert ledger.read_text().split("\n") == ["fetch c0", "crash c1", "crash c1", ""]
    task_result = result.task_results["t1"]
    assert task_result.output == f"saw {LONE} | survived"
    fetched = task_result.tool_calls[0]
    assert (fetched.tool_call_id, fetched.output, fetched.input) == ("c0", LONE, {"url": "u\ud800"})
    [task] = result.tasks
    assert (task.title, dict(task.metadata or {})) == ("read \ud800", {"note": "meta \udfff"})


if __name__ == "__main__":
    asyncio.run(_child(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
