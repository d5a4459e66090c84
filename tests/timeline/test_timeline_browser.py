"""The timeline page in headless Chromium: it renders, and its DOM holds every task and call.

Debian's ``chromium`` package; skipped locally without it, a failure under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from html import unescape
from pathlib import Path

from service_kit import require_executable
from timeline_runs import restored_demo

from oma_actors.timeline import build_timeline, render_timeline_html

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions"]


def chromium(binary: str, tmp_path: Path, *args: str) -> str:
    done = subprocess.run(
        [binary, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True, text=True, timeout=90, check=True,
    )  # fmt: skip
    return done.stdout


def test_the_page_of_a_restored_run_renders_with_every_task_and_call(tmp_path: Path) -> None:
    binary = require_executable("chromium")
    snap, events = asyncio.run(restored_demo(tmp_path / "run"))
    timeline = build_timeline(snap, events)
    page = tmp_path / "timeline.html"
    page.write_text(render_timeline_html(timeline), encoding="utf-8")
    url = page.as_uri()

    shot = tmp_path / "timeline.png"
    chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,900", url)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000

    dom = chromium(binary, tmp_path, "--dump-dom", url)
    tasks = re.findall(r'class="lane" data-task="([^"]+)"', dom)
    assert tasks == [lane.task_id for lane in timeline.lanes]
    calls = [
        (unescape(call_id), unescape(mark))
        for call_id, mark in re.findall(r'data-call="([^"]+)"[^>]*data-mark="([^"]+)"', dom)
    ]
    assert calls == [(c.call_id, c.mark) for c in timeline.calls]
    assert ("call-analyse-0-0", "replayed") in calls
    assert ("call-analyse-0-1", "re-ran") in calls
    assert len(re.findall(r"data-call=", dom)) == len(timeline.calls) == 10
    # The script ran in the browser: it set the zoom label (empty in the page as written).
    assert '<span id="zoom">100%</span>' in dom
