"""Guards of ``jsonl_scan.scan_run`` that no other test holds (a mutation sweep).

``read_run`` seeks from the end of a JSONL file; a line the scan cannot read unparsed must send
it to the whole-file read, never be skipped as another run's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.journal import JournalEvent, JsonlRunJournal, to_json_line
from oma_actors.journal.jsjson import js_dumps

if TYPE_CHECKING:
    from pathlib import Path


def event(run_id: str, seq: int) -> JournalEvent:
    return JournalEvent(
        seq=seq,
        type="turn/start",
        run_id=run_id,
        attempt=1,
        timestamp_unix_ms=1_700_000_000_000 + seq,
        data={"turn": seq},
    )


def other_key_order(e: JournalEvent) -> str:
    """``e``'s line as another writer may order its keys: the run id first (neither the layout
    OMA writes nor the one earlier versions wrote)."""
    return js_dumps(
        {
            "runId": e.run_id,
            "attempt": e.attempt,
            "seq": e.seq,
            "timestampUnixMs": e.timestamp_unix_ms,
            "type": e.type,
            **e.data,
        }
    )


async def test_a_line_in_neither_layout_is_read_not_skipped(tmp_path: Path) -> None:
    """Holds ``scan_run``'s ``return None  # in neither layout``: the run's line in another key
    order, above the seek point, is found by the whole-file read instead of being lost."""
    path = tmp_path / "run.jsonl"
    lines = [
        to_json_line(event("run", 1)),
        to_json_line(event("other", 1)),
        other_key_order(event("run", 2)),
        to_json_line(event("other", 2)),
    ]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    journal = JsonlRunJournal(path)
    try:
        everything = [(e.run_id, e.seq) for e in await journal.read_from(0)]
        assert ("run", 2) in everything  # the whole-file read parses any key order
        assert [e.seq for e in await journal.read_run("run", 2)] == [2]
        assert [e.seq for e in await journal.read_range("run", 2, types=["turn/start"])] == [2]
    finally:
        await journal.close()
