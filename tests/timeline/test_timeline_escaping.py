"""Stored text never reaches a terminal or a page as something to obey (issue 24 item 7, 25).

Model text, tool output, titles, ids and approval reasons come from outside. On a terminal an
ESC/CSI/OSC sequence, a C1 control, NUL or a bidi override could move the cursor and forge a
mark, retitle the window or reorder what is read; in the HTML page a tag would run.
"""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser

import pytest
from markupsafe import escape
from rich.console import Console

from oma_actors.timeline import (
    Timeline,
    TimelineApproval,
    TimelineCall,
    TimelineLane,
    TimelineTurn,
    render_timeline_html,
    render_timeline_text,
)
from oma_actors.timeline.terminal import terminal_safe

HOSTILE = (
    "\x1b[2J\x1b[1;1H✓ executed"  # clear the screen, home the cursor, forge a mark
    "\x1b]0;owned\x07"  # OSC: set the window title
    "\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\"  # OSC 8 hyperlink
    "\x00nul\x9b31mc1-csi\x85nel"  # NUL, a one-character CSI, NEL
    "\u202egnp.exe\u202c \u2066isolate\u2069 \u200fmark"  # bidi override, isolate, RLM
    "\x08\x7f\r"  # backspace, DEL, carriage return
)
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def hostile_timeline(text: str) -> Timeline:
    call = TimelineCall(call_id=f"call-{text}", tool_name=f"tool-{text}", mark="executed",
                        attempt=1, result=f"out-{text}", approval_id=f"apr-{text}")  # fmt: skip
    turn = TimelineTurn(index=1, attempt=1, text=f"said-{text}", input_tokens=1, output_tokens=1,
                        calls=(call,))  # fmt: skip
    lane = TimelineLane(task_id=f"t-{text}", title=f"title-{text}", status="completed",
                        assignee=f"agent-{text}", attempts=(1,), turns=(turn,), input_tokens=1,
                        output_tokens=1)  # fmt: skip
    approval = TimelineApproval(request_id=f"apr-{text}", scope="tool_call", task_id=None,
                                tool_call_id=None, reason=f"reason-{text}", requested_at="",
                                decision="reject", reviewer=f"rev-{text}", decided_at="then")  # fmt: skip
    return Timeline(run_id=f"run-{text}", attempt=1, revision=1, status="completed",
                    from_journal=True, lanes=(lane,), approvals=(approval,))  # fmt: skip


def terminal_output(timeline: Timeline) -> str:
    # Exactly what a colour terminal receives (the sidecar's GetRunTimeline text too).
    out = io.StringIO()
    Console(file=out, width=400, force_terminal=True, color_system="truecolor").print(
        render_timeline_text(timeline)
    )
    return out.getvalue()


def test_terminal_safe_shows_every_control_escape_and_bidi_override() -> None:
    safe = terminal_safe(HOSTILE)
    assert not UNSAFE.search(safe)
    assert "\n" not in terminal_safe("a\nb\tc")
    assert terminal_safe("a\nb\tc", keep_newlines=True) == "a\nb\tc"
    assert safe.startswith("\\x1b[2J\\x1b[1;1H✓ executed")  # visible, not obeyed
    assert "\\u202egnp.exe" in safe
    assert terminal_safe("plain ünïcode — text 名前") == "plain ünïcode — text 名前"


def test_the_terminal_timeline_passes_no_control_from_any_stored_text() -> None:
    out = terminal_output(hostile_timeline(HOSTILE))
    # rich's own styling is SGR (ESC [ ... m); nothing else may reach the terminal.
    styling_removed = re.sub("\x1b\\[[0-9;]*m", "", out)
    assert not UNSAFE.search(styling_removed.replace("\n", ""))
    assert "\\u202e" in styling_removed


@pytest.mark.parametrize(
    "where", ["title", "assignee", "text", "tool_name", "call_id", "result", "reason", "run_id"]
)
def test_each_field_is_escaped_on_its_own(where: str) -> None:
    # One hostile field at a time, so no field rides on another's escaping.
    timeline = hostile_timeline("x")
    lane = timeline.lanes[0]
    turn = lane.turns[0]
    call = turn.calls[0]
    evil = "\x1b]0;owned\x07\u202e"
    if where in ("tool_name", "call_id", "result"):
        turn = TimelineTurn(
            **{**_fields(turn), "calls": (TimelineCall(**{**_fields(call), where: evil}),)}
        )
    elif where == "text":
        turn = TimelineTurn(**{**_fields(turn), "text": evil})
    if where in ("title", "assignee"):
        lane = TimelineLane(**{**_fields(lane), where: evil})
    lane = TimelineLane(**{**_fields(lane), "turns": (turn,)})
    approvals = timeline.approvals
    if where == "reason":
        approvals = (TimelineApproval(**{**_fields(approvals[0]), "reason": evil}),)
    fields = {**_fields(timeline), "lanes": (lane,), "approvals": approvals}
    if where == "run_id":
        fields["run_id"] = evil
    out = re.sub("\x1b\\[[0-9;]*m", "", terminal_output(Timeline(**fields)))
    assert "\x1b]" not in out
    assert "\u202e" not in out
    assert "\\x1b]0;owned\\x07" in out


def test_the_page_escapes_turn_text_and_approval_reasons() -> None:
    tag = '<img src=x onerror="alert(1)">'
    page = render_timeline_html(hostile_timeline(tag))
    assert "<img" not in page
    shown = escape(tag)
    assert str(shown) in page
    # The turn's text cell and the approvals list, each on its own (not only the detail panel).
    assert f'<div class="t">said-{shown}</div>' in page
    assert f"— reason-{shown}</li>" in page


ATTACK = "</script><script>alert(1)</script>\"'><img onerror=alert(2) src=x>"


class _Page(HTMLParser):
    """The elements, attributes, texts and script bodies a browser would see."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.texts: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((name, value or "") for name, value in attrs)
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.texts.append(data)


def test_a_hostile_title_or_tool_output_is_escaped_in_every_position() -> None:
    page_text = render_timeline_html(hostile_timeline(ATTACK))
    page = _Page()
    page.feed(page_text)
    # No element came from stored text: the page's own two scripts, no img, no event handler.
    assert "img" not in page.tags
    assert page.tags.count("script") == 2
    assert not [name for name, _ in page.attrs if name.startswith("on")]
    # Text positions: the value reads back exactly, as text.
    for shown in (f"title-{ATTACK}", f"said-{ATTACK}", f"tool-{ATTACK} · executed"):
        assert shown in page.texts, shown
    # Attribute positions: each attribute holds the whole value, none broke out of its quotes.
    attributes = dict(page.attrs)
    assert attributes["data-task"] == f"t-{ATTACK}"
    assert attributes["data-call"] == f"call-{ATTACK}"
    assert attributes["data-run"] == f"run-{ATTACK}"
    details = [value for name, value in page.attrs if name == "data-detail"]
    assert any(f"result: out-{ATTACK}" in value for value in details)
    # Embedded JSON in <script>: it cannot close its script, and it parses back to the value.
    island = page.scripts[0]
    assert "<" not in island
    assert ">" not in island
    data = json.loads(island)
    assert data["run_id"] == f"run-{ATTACK}"
    assert data["tasks"][0]["title"] == f"title-{ATTACK}"
    assert data["tasks"][0]["calls"][0]["call_id"] == f"call-{ATTACK}"


def _fields(value: object) -> dict[str, object]:
    return {name: getattr(value, name) for name in value.__slots__}  # type: ignore[attr-defined]


def test_the_sidecars_timeline_text_passes_no_control_either() -> None:
    # GetRunTimeline's text is this renderer printed without colour: nothing may survive.
    from sidecar.timelines import timeline_text

    text = timeline_text(hostile_timeline(HOSTILE), 200)
    assert not UNSAFE.search(text.replace("\n", ""))
    assert "\\x1b]0;owned\\x07" in text
