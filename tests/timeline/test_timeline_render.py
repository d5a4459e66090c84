"""The timeline's renderings: rich text within 80 columns, and a self-contained HTML page."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from rich.console import Console
from test_timeline_model import in_flight_snapshot
from timeline_runs import restored_demo

from oma_actors.timeline import build_timeline, render_timeline_html, render_timeline_text


def text_at(width: int, timeline: object) -> str:
    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render_timeline_text(timeline))  # type: ignore[arg-type]
    console.file.close()
    return console.export_text()


def test_the_terminal_timeline_fits_80_columns_and_shows_every_mark(tmp_path: Path) -> None:
    snap, events = asyncio.run(restored_demo(tmp_path))
    timeline = build_timeline(snap, events)
    text = text_at(80, timeline)
    assert max(len(line) for line in text.splitlines()) <= 80
    for lane in timeline.lanes:
        assert lane.title in text
    assert "↺ replayed  search_corpus call-analyse-0-0" in text
    assert "⟳ re-ran  write_note call-analyse-0-1" in text
    assert "attempt 2 (restored)" in text
    assert "90 in / 50 out tokens" in text


def test_approvals_show_pending_and_who_decided_when() -> None:
    pending = text_at(80, build_timeline(in_flight_snapshot(decided=False)))
    assert "apr_1 (tool_call)  pending" in pending
    assert "⏸ awaiting approval" in pending
    decided = text_at(80, build_timeline(in_flight_snapshot(decided=True)))
    assert "approve by alice@example.com at 2026-01-02T03:04:05.000Z" in decided


def test_the_page_is_self_contained_and_escapes_stored_text(tmp_path: Path) -> None:
    snap, events = asyncio.run(restored_demo(tmp_path))
    timeline = build_timeline(snap, events)
    evil = timeline.lanes[0].__class__(
        **{**_fields(timeline.lanes[0]), "title": "<script>x</script>"}
    )
    page = render_timeline_html(timeline.__class__(**{**_fields(timeline), "lanes": (evil,)}))
    assert "<script>x</script>" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    page = render_timeline_html(timeline)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched
    assert page.count('class="lane"') == len(timeline.lanes)
    assert 'data-call="call-analyse-0-0"' in page
    assert 'data-mark="replayed"' in page


def _fields(value: object) -> dict[str, object]:
    return {name: getattr(value, name) for name in value.__slots__}  # type: ignore[attr-defined]
