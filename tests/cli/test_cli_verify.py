"""``oma verify JOURNAL [--json]``: exit 0 ok, 1 failures, 2 unreadable."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from oma_actors.journal import JournalEvent, open_journal, to_json_line
from oma_actors.stores import parse_store_uri, store_missing

if TYPE_CHECKING:
    from pathlib import Path

    from service_kit import FreshStores


def oma(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oma_actors.cli.main", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def event(seq: int, sources: list[int] | None = None, *, run: str = "r") -> JournalEvent:
    return JournalEvent(
        seq=seq,
        type="turn/start",
        run_id=run,
        attempt=1,
        timestamp_unix_ms=seq,
        source_event_seqs=sources,
        data={"turn": seq},
    )


def line(seq: int, sources: list[int] | None = None, *, run: str = "r") -> str:
    return to_json_line(event(seq, sources, run=run))


def test_verify_exit_codes_and_json(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(f"{line(1)}\n{line(2, [1])}\n" + '{"type":"turn/st')  # torn tail: ignored
    done = oma("verify", str(good), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "ok": True, "failures": [], "inconclusive": [],
        "stats": {"events": 2, "requests": 0, "blocks_checked": 0}, "runs": ["r"],
    }  # fmt: skip

    bad = tmp_path / "bad.jsonl"
    bad.write_text(f"{line(1)}\n{line(1)}\n{line(3, [2])}\n")
    failed = oma("verify", str(bad), "--json")
    assert failed.returncode == 1
    result = json.loads(failed.stdout)
    assert [(f["code"], f["reason"], f["seq"]) for f in result["failures"]] == [
        ("SEQ_NOT_MONOTONIC", "duplicate-sequence", 1)
    ]
    gap = {"code": "BROKEN_LINK", "reason": "missing-source", "seq": 3, "missing_seqs": [2]}
    assert result["inconclusive"] == [{**gap, "run_id": "r"}]
    text = oma("verify", str(bad))
    assert text.returncode == 1
    assert "FAILED" in text.stdout
    assert "SEQ_NOT_MONOTONIC/duplicate-sequence" in text.stdout

    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(f"not json\n{line(2)}\n")
    unreadable = oma("verify", str(corrupt))
    assert unreadable.returncode == 2
    assert unreadable.stdout == ""  # errors go to stderr, one line
    assert "line 1" in unreadable.stderr
    assert len(unreadable.stderr.splitlines()) == 1
    absent = oma("verify", str(tmp_path / "absent.jsonl"))
    assert absent.returncode == 2
    assert "no journal file at" in absent.stderr


def test_verify_errors_are_one_plain_line_on_stderr_and_stdout_stays_clean(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(f"not json\n{line(2)}\n")
    for argv in (("verify", str(corrupt), "--json"), ("verify", str(tmp_path / "absent.jsonl"))):
        done = oma(*argv)
        assert done.returncode == 2
        assert done.stdout == ""  # a --json consumer never parses an error
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "[red]" not in done.stderr
        assert "[/]" not in done.stderr


def test_a_journal_of_garbage_alone_is_an_error_not_ok(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("this is not a journal at all")  # one torn-looking line, no event
    for argv in (("verify", str(garbage)), ("verify", str(garbage), "--json")):
        done = oma(*argv)
        assert done.returncode == 2, done.stdout
        assert "ok" not in done.stdout
        assert "no valid event" in done.stderr


# A journal file may hold several runs (README's "one file for many runs", a fork child continuing
# in its parent's journal): seqs are numbered per run, so a healthy file of two runs repeats seqs
# and must verify ("ok: 2 runs"); a defect of one run fails with a line naming its run and seq.


def journal(path: Path, *lines: str) -> str:
    path.write_text("".join(f"{item}\n" for item in lines))
    return str(path)


def test_a_healthy_two_run_journal_verifies_per_run(tmp_path: Path) -> None:
    both = journal(
        tmp_path / "two.jsonl",
        line(1, run="A"), line(2, [1], run="A"), line(3, [2], run="A"),
        line(1, run="B"), line(2, [1], run="B"),
    )  # fmt: skip
    text = oma("verify", both)
    assert text.returncode == 0, text.stdout + text.stderr
    assert text.stdout.splitlines()[0] == "ok: 2 runs, 5 events, 0 requests, 0 blocks checked"
    done = oma("verify", both, "--json")
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert (result["ok"], result["failures"], result["runs"]) == (True, [], ["A", "B"])


def test_a_fork_style_journal_verifies(tmp_path: Path) -> None:
    # The child's seqs continue above the fork point (2), over seqs the parent used after it.
    forked = journal(
        tmp_path / "fork.jsonl",
        line(1, run="parent"), line(2, [1], run="parent"), line(3, [2], run="parent"), line(4, [3], run="parent"),
        line(3, run="child"), line(4, [3], run="child"), line(5, [4], run="child"),
    )  # fmt: skip
    done = oma("verify", forked)
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("ok: 2 runs, 7 events")


def test_a_duplicate_seq_within_one_run_fails_naming_the_run_and_seq(tmp_path: Path) -> None:
    bad = journal(
        tmp_path / "bad.jsonl",
        line(1, run="A"), line(2, [1], run="A"),
        line(1, run="B"), line(2, [1], run="B"), line(2, [1], run="B"), line(3, [2], run="B"),
    )  # fmt: skip
    text = oma("verify", bad)
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[0] == "FAILED: 2 runs, 6 events, 0 requests, 0 blocks checked"
    assert lines[1:] == ["  failure: run B seq 2 SEQ_NOT_MONOTONIC/duplicate-sequence"]
    done = oma("verify", bad, "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["failures"] == [
        {"code": "SEQ_NOT_MONOTONIC", "reason": "duplicate-sequence", "seq": 2, "run_id": "B"}
    ]


def test_a_run_id_from_the_file_never_drives_the_terminal(tmp_path: Path) -> None:
    hostile = "\x1b[2Jr"
    bad = journal(tmp_path / "hostile.jsonl", line(1, run=hostile), line(1, run=hostile))
    done = oma("verify", bad)
    assert done.returncode == 1
    assert "\x1b" not in done.stdout
    assert "run \\x1b[2Jr seq 1 SEQ_NOT_MONOTONIC/duplicate-sequence" in done.stdout


# A SQLite or PostgreSQL store keeps its runs' journal in its own database (D15): ``oma verify``
# takes the store's URI, as every --store does, and verifies each run of that journal exactly as
# it verifies the same events in a JSONL file. What is not there is refused, and not created.

TWO_RUNS = (
    event(1, run="A"), event(2, [1], run="A"), event(3, [2], run="A"),
    event(1, run="B"), event(2, [5], run="B"),  # B's seq 2 cites a later seq: a broken link
)  # fmt: skip


async def database_uri(kind: str, fresh_stores: FreshStores) -> str:
    """The URI of a new, empty store of ``kind`` (its table made, no journal yet)."""
    if kind == "sqlite":
        return f"sqlite://{(await fresh_stores.sqlite()).path}"
    store = await fresh_stores.postgres()
    return f"{store.dsn}?table={store.table}"


async def drop_marks(uri: str) -> None:
    """Drop the journal's marks table a PostgreSQL journal made (fresh_stores drops the rest)."""
    target = parse_store_uri(uri)
    if target.kind != "postgresql":
        return
    import asyncpg

    connection = await asyncpg.connect(target.location)
    try:
        await connection.execute(f'DROP TABLE IF EXISTS "{target.option}_journal_marks"')
    finally:
        await connection.close()


async def journal_table_missing(uri: str) -> bool:
    """Whether the store ``uri`` names has no journal table, asked without creating one."""
    target = parse_store_uri(uri)
    table = f"{target.option or 'oma_kv'}_journal"
    if target.kind == "postgresql":
        return await store_missing(parse_store_uri(f"{target.location}?table={table}")) is not None
    with sqlite3.connect(f"file:{target.location}?mode=ro", uri=True) as connection:
        found = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
    return found is None


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_database_journal_verifies_each_run_as_the_same_jsonl_does(
    kind: str, fresh_stores: FreshStores, tmp_path: Path
) -> None:
    uri = await database_uri(kind, fresh_stores)
    table = open_journal(uri)
    try:
        await table.append(list(TWO_RUNS))
        await table.close()
        done = await asyncio.to_thread(oma, "verify", uri, "--json")
        assert done.returncode == 1, done.stderr
        result = json.loads(done.stdout)
        assert result["runs"] == ["A", "B"]
        assert result["failures"] == [
            {"code": "BROKEN_LINK", "reason": "forward-reference", "seq": 2, "run_id": "B"}
        ]
        same = journal(tmp_path / "same.jsonl", *(to_json_line(e) for e in TWO_RUNS))
        assert json.loads(oma("verify", same, "--json").stdout) == result
        text = await asyncio.to_thread(oma, "verify", uri)
        assert text.returncode == 1
        assert text.stdout.splitlines() == [
            "FAILED: 2 runs, 5 events, 0 requests, 0 blocks checked",
            "  failure: run B seq 2 BROKEN_LINK/forward-reference",
        ]
    finally:
        await drop_marks(uri)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_store_without_a_journal_is_refused_and_none_is_created(
    kind: str, fresh_stores: FreshStores
) -> None:
    uri = await database_uri(kind, fresh_stores)
    shown = parse_store_uri(uri).uri
    done = await asyncio.to_thread(oma, "verify", uri, "--json")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip() == (
        f"oma verify: no run journal in {shown} (it holds no oma_kv_journal table)"
        if kind == "sqlite"
        else f"oma verify: no run journal in {shown} "
        f"(it holds no {parse_store_uri(uri).option}_journal table)"
    )
    assert await journal_table_missing(uri)  # still not there


async def test_a_missing_database_store_is_refused_as_every_store_command_refuses_it(
    fresh_stores: FreshStores, tmp_path: Path
) -> None:
    absent = tmp_path / "mistyped.db"
    done = await asyncio.to_thread(oma, "verify", f"sqlite://{absent}")
    assert done.returncode == 2
    assert done.stderr.strip() == f"oma verify: no store file at {absent}"
    assert not absent.exists()
    dsn, table = fresh_stores.postgres_table()  # never created
    mistyped = await asyncio.to_thread(oma, "verify", f"{dsn}?table={table}")
    assert mistyped.returncode == 2
    assert f"no store table {table!r}" in mistyped.stderr
    assert await store_missing(parse_store_uri(f"{dsn}?table={table}")) is not None


def test_stores_that_keep_no_journal_and_bad_uris_are_one_line_errors(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all, but some bytes")
    for uri, says in (
        ("redis://:hunter2@127.0.0.1:1/0", "a redis store keeps no run journal to verify"),
        ("memory://x", "a memory store keeps no run journal to verify"),
        ("sqlite://relative.db", "names host 'relative.db'"),
        ("ftp://host/x", "unknown store URI scheme"),
        (f"sqlite://{garbage}", "is not a database"),
    ):
        done = oma("verify", uri, "--json")
        assert done.returncode == 2, (uri, done.stdout)
        assert done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert says in done.stderr, done.stderr
        assert "hunter2" not in done.stderr
    assert garbage.read_bytes() == b"not a database at all, but some bytes"


def test_a_file_uri_names_the_jsonl_journal(tmp_path: Path) -> None:
    path = journal(tmp_path / "run.jsonl", line(1), line(2, [1]))
    done = oma("verify", f"file://{path}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: 1 run, 2 events")
    absent = oma("verify", f"file://{tmp_path}/absent.jsonl")
    assert absent.returncode == 2
    assert absent.stderr.strip() == f"oma verify: no journal file at {tmp_path}/absent.jsonl"
