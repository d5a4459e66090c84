"""``oma demo``: the research team, killed mid-task in a child process, then restored."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from typing import TYPE_CHECKING

import aiofiles
import aiofiles.os

from oma_actors import CheckpointOptions, ConfigurationError, OpenMultiAgent, StoreError
from oma_actors.approvals import Allow, Suspend, ToolCallRequest
from oma_actors.checkpoint import Checkpoint
from oma_actors.cli.demo_team import PLAYBOOK, demo_tasks, demo_team
from oma_actors.cli.display import show_event, show_result, show_snapshot
from oma_actors.cli.failure import CommandFailed
from oma_actors.cli.tail import with_tail
from oma_actors.events import ProgressEvent, TaskStarted, ToolCalled
from oma_actors.journal import JsonlRunJournal
from oma_actors.stores import FileStore
from oma_actors.timeline import build_timeline, render_timeline_html, render_timeline_text

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from oma_actors import Team

CRASH_EXIT = 86
RUN_ID = "demo-run"
CRASH_NOTE = "analysis.md"
STATE = "state.json"
JOURNAL = "journal.jsonl"
TIMELINE_PAGE = "timeline.html"
MARKER = ".oma-demo"
MARKER_TEXT = (
    "This folder holds the output of `oma demo`. The next `oma demo --out` into it replaces\n"
    "its state.json, journal.jsonl, timeline.html and notes; it refuses folders without this\n"
    "file that hold any of them.\n"
)
# A demo's state.json or journal is a few dozen KiB: a bigger file is somebody else's.
MAX_DEMO_FILE_BYTES = 16 << 20


def live_team(out_dir: Path) -> Team:
    """The demo team on a real provider, chosen from the API key in the environment.

    The agents name their provider and model, so the run builds their adapters the way any
    ``AgentConfig(provider=..., model=...)`` gets one (a missing SDK extra or key is a
    ``ConfigurationError`` when the run starts).
    """
    if os.environ.get("ANTHROPIC_API_KEY"):
        provider, model = "anthropic", os.environ.get("OMA_DEMO_MODEL", "claude-sonnet-4-5")
    elif os.environ.get("OPENAI_API_KEY"):
        provider, model = "openai", os.environ.get("OMA_DEMO_MODEL", "gpt-4o-mini")
    else:
        raise ConfigurationError(
            "--live needs ANTHROPIC_API_KEY or OPENAI_API_KEY in the environment"
        )
    return demo_team(out_dir, provider=provider, model=model)


async def make_out_dir(out_dir: Path) -> None:
    """Create the demo folder ``--out`` names (and its parents), if it is not there yet.

    Raises:
        CommandFailed: ``--out`` names a file, or the folder cannot be created (exit 2).
    """
    try:
        await aiofiles.os.makedirs(out_dir, exist_ok=True)
    except FileExistsError:
        raise CommandFailed(f"--out {out_dir} is a file, not a directory") from None
    except OSError as exc:
        raise CommandFailed(f"cannot create --out {out_dir}: {exc.strerror or exc}") from None


def demo_files() -> tuple[str, ...]:
    """The names the demo writes into its folder (besides the marker), notes included."""
    notes = {
        name
        for turns in PLAYBOOK.values()
        for turn in turns
        for kind, name in turn
        if kind == "write"
    }
    return (STATE, f"{STATE}.lock", JOURNAL, TIMELINE_PAGE, *sorted(notes))


async def claim_out_dir(out_dir: Path, *, reset: tuple[str, ...] = ()) -> None:
    """Make ``out_dir`` the demo's folder, then remove the ``reset`` files of its last run.

    The demo replaces only its own output. A folder is the demo's when it is new, holds none
    of ``demo_files()``, holds the demo's marker file, or (output of a demo older than the
    marker) holds a state.json with demo-run entries only; in every case a state.json or
    journal that holds anything but the demo's run is somebody else's and is refused. The
    state file is removed only while this process holds its FileStore lock, so a store that
    another process has open is never pulled from under it.

    Raises:
        CommandFailed: ``--out`` is not usable, holds files the demo did not write, or its
            state.json is in use by another process (exit 2; nothing in the folder changed).
    """
    await make_out_dir(out_dir)
    present = [name for name in demo_files() if await _lexists(out_dir / name)]
    marked = await aiofiles.os.path.isfile(out_dir / MARKER)
    state_entries = await _demo_entries(out_dir / STATE) if STATE in present else 0
    foreign: list[str] = []
    if state_entries is None:
        foreign.append(STATE)
    if JOURNAL in present and not await _demo_journal(out_dir):
        foreign.append(JOURNAL)
    if not foreign and not marked and not state_entries:
        foreign = present  # no sign of an earlier demo: every one of its names is somebody's
    if foreign:
        raise CommandFailed(
            f"--out {out_dir} already holds {', '.join(foreign)} that oma demo did not write; "
            "it replaces only its own output: choose a new or empty folder"
        )
    try:
        # Locked for the removal: a process that has this store open keeps its file.
        async with FileStore.open(out_dir / STATE):
            if not marked:
                async with aiofiles.open(out_dir / MARKER, "w", encoding="utf-8") as marker:
                    await marker.write(MARKER_TEXT)
            for name in reset:
                if name in present:
                    await aiofiles.os.remove(out_dir / name)
    except StoreError as exc:
        reason = str(exc).split("; ", 1)[0]
        raise CommandFailed(
            f"--out {out_dir}: {reason}; oma demo leaves it alone: stop that process or "
            "choose another folder"
        ) from None


async def _lexists(path: Path) -> bool:
    """Whether anything (a dangling symlink included) has this name."""
    return await asyncio.to_thread(os.path.lexists, path)


async def _read_small(path: Path) -> bytes | None:
    """The bytes of a regular file of at most ``MAX_DEMO_FILE_BYTES``, else ``None``.

    A symlink, device, FIFO or directory under a demo name is none of the demo's doing.
    """
    try:
        info = await aiofiles.os.stat(path, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_DEMO_FILE_BYTES:
            return None
        async with aiofiles.open(path, "rb") as handle:
            data: bytes = await handle.read(MAX_DEMO_FILE_BYTES + 1)
    except OSError:  # unreadable: whatever it is, the demo cannot tell it is its own
        return None
    return data if len(data) <= MAX_DEMO_FILE_BYTES else None


async def _demo_entries(path: Path) -> int | None:
    """How many entries the state file holds, or ``None`` when any is not the demo run's.

    An entry is the demo run's when its key names the run (``__oma_checkpoint__/demo-run/...``,
    ``__oma_history__/demo-run/...``) or its metadata does (an approval of the run). A file that
    is not a readable state file is not the demo's either.
    """
    data = await _read_small(path)
    try:
        document = json.loads(data) if data is not None else None
    except ValueError:
        return None
    entries = document.get("entries") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            return None
        metadata = entry.get("metadata")
        run_id = metadata.get("runId") if isinstance(metadata, dict) else None
        key: str = entry["key"]
        if not (key.startswith("__oma_") and key.split("/")[1:2] == [RUN_ID]) and run_id != RUN_ID:
            return None
    return len(entries)


async def _demo_journal(out_dir: Path) -> bool:
    """Whether every event of the journal is of the demo run (a torn last line is ignored)."""
    data = await _read_small(out_dir / JOURNAL)
    if data is None:
        return False
    lines = data.split(b"\n")
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            if index == len(lines) - 1:  # the crashed child's last write, cut short
                continue
            return False
        if not isinstance(event, dict) or event.get("runId") != RUN_ID:
            return False
    return True


def checkpoint_options(out_dir: Path) -> CheckpointOptions:
    """The demo's checkpoint: a FileStore in the demo folder, a fixed run id."""
    return CheckpointOptions(store=FileStore(out_dir / STATE), run_id=RUN_ID)


async def run_plain(out_dir: Path, *, live: bool, console: Console) -> int:
    """Run the team once (``--no-crash`` or ``--live``) with a checkpoint in the demo folder."""
    team = live_team(out_dir) if live else demo_team(out_dir)
    await claim_out_dir(out_dir)
    console.rule("oma demo: research team, 3 agents, 5 tasks")
    orchestrator = OpenMultiAgent(on_progress=lambda e: show_event(console, e), max_concurrency=3)
    result = await orchestrator.run_tasks(
        team, demo_tasks(), checkpoint=checkpoint_options(out_dir)
    )
    show_result(console, result, out_dir)
    return 0 if result.success else 1


async def run_crashing_child(out_dir: Path, console: Console) -> int:
    """The child process: run until the analyst's note is written, then die before its commit.

    It waits until the analyst's parallel search result is durable, so the checkpoint holds one
    committed call (to be replayed) and one uncommitted call (to be re-run).
    """
    search_committed = asyncio.Event()

    def observe(event: ProgressEvent) -> None:
        show_event(console, event)
        # The parallel search of "Analyse findings" (its call ids are call-analyse-*).
        if isinstance(event, ToolCalled) and event.tool_call_id.startswith("call-analyse"):
            search_committed.set()

    async def after_write(filename: str) -> None:
        if filename == CRASH_NOTE:
            await search_committed.wait()
            console.print(
                f"[bold red]✖ killed[/] the process after writing {CRASH_NOTE}, before its commit"
            )
            sys.stdout.flush()
            os._exit(CRASH_EXIT)  # a crash: no cleanup, no finally, no flush of anything else

    team = demo_team(out_dir, after_write=after_write)
    orchestrator = OpenMultiAgent(on_progress=observe, max_concurrency=3)
    # Journal-first durability (D10): the per-turn saves are fsynced journal lines, the snapshot
    # in state.json is written at compaction points; the journal is also the timeline's source.
    journal = JsonlRunJournal(out_dir / JOURNAL, flush_interval_ms=0)
    await orchestrator.run_tasks(
        team, demo_tasks(), checkpoint=checkpoint_options(out_dir), journal=journal
    )
    return 0


async def run_demo(out_dir: Path, *, console: Console) -> int:
    """Crash the run in a child process, show the checkpoint, restore it here, explain."""
    await claim_out_dir(out_dir, reset=(STATE, JOURNAL))
    console.rule("1. run the research team in a child process (it will be killed mid-task)")
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oma_actors.cli.main", "demo", "--out", str(out_dir), "--child"
    )
    code = await child.wait()
    if code != CRASH_EXIT:
        console.print(f"[red]the child exited with {code}, expected the crash code {CRASH_EXIT}[/]")
        return 1

    console.rule("2. what the checkpoint holds (state.json + journal tail, read afresh)")
    store = FileStore(out_dir / STATE)
    stored = await Checkpoint(store, run_id=RUN_ID).load_latest()
    if stored is None:
        console.print("[red]no checkpoint was written[/]")
        return 1
    view = await with_tail(stored)
    snapshot = view.snapshot
    show_snapshot(console, snapshot)
    if view.note is not None:
        console.print(view.note, markup=False, highlight=False)
    completed = {task.id: task.title for task in snapshot.tasks if task.status == "completed"}
    pending_ids = {
        item.call.id: item.commit is not None
        for entry in snapshot.in_flight
        for item in entry.state.pending
    }

    console.rule("3. restore: same run id, attempt + 1")
    started: list[str] = []
    replayed: list[str] = []
    re_ran: list[str] = []

    def observe(event: ProgressEvent) -> None:
        show_event(console, event)
        if isinstance(event, TaskStarted):
            started.append(event.task_id)
        if isinstance(event, ToolCalled) and event.tool_call_id in pending_ids:
            label = f"{event.tool_name} ({event.tool_call_id})"
            (replayed if event.replayed else re_ran).append(label)

    team = demo_team(out_dir)
    orchestrator = OpenMultiAgent(on_progress=observe, max_concurrency=3)
    journal = JsonlRunJournal(out_dir / JOURNAL)
    try:
        result = await orchestrator.restore(
            team, checkpoint=CheckpointOptions(store=store, run_id=RUN_ID), journal=journal
        )
    finally:
        await journal.close()
    show_result(console, result, out_dir)

    console.rule("4. what the restore did")
    skipped = [title for task_id, title in completed.items() if task_id not in started]
    console.print(
        f"[green]skipped[/] (completed before the crash, no model call): {', '.join(skipped)}"
    )
    console.print(
        f"[yellow]replayed[/] (committed result reused, tool not run): {', '.join(replayed) or '-'}"
    )
    console.print(f"[cyan]re-ran[/] (no commit, same tool_call_id): {', '.join(re_ran) or '-'}")
    console.print(f"run {result.run_id}: attempt {result.attempt}, status {result.status.code}")
    await show_timeline(out_dir, store, console)
    return 0 if result.success else 1


async def show_timeline(out_dir: Path, store: FileStore, console: Console) -> None:
    """Print the restored run's timeline and write its page (``oma runs show`` does the same)."""
    console.rule("5. the run's timeline (oma runs show demo-run --journal ... --html ...)")
    snapshot = await Checkpoint(store, run_id=RUN_ID).load_latest()
    if snapshot is None:
        return
    journal = JsonlRunJournal(out_dir / JOURNAL)
    try:
        events = await journal.read_from(0)
    finally:
        await journal.close()
    timeline = build_timeline(snapshot, events)
    console.print(render_timeline_text(timeline))
    page = out_dir / TIMELINE_PAGE
    async with aiofiles.open(page, "w", encoding="utf-8") as out:
        await out.write(render_timeline_html(timeline))
    console.print(f"timeline page: {page.resolve()}", markup=False, highlight=False, soft_wrap=True)


async def run_approval_demo(out_dir: Path, *, console: Console) -> int:
    """Suspend on the brief's publication, decide from another process, resume once."""
    await claim_out_dir(out_dir, reset=(STATE,))
    state = out_dir / STATE

    def gate(call: ToolCallRequest) -> Allow | Suspend:
        if call.tool_name == "write_note" and call.input.get("filename") == "brief.md":
            return Suspend("publishing the brief needs an editor's approval")
        return Allow()

    console.rule("1. run: the writer's publication of brief.md waits for a reviewer")
    orchestrator = OpenMultiAgent(
        on_progress=lambda e: show_event(console, e), max_concurrency=3, on_tool_call=gate
    )
    options = checkpoint_options(out_dir)
    first = await orchestrator.run_tasks(demo_team(out_dir), demo_tasks(), checkpoint=options)
    # The store locked its file at its first write; give the lock back so the reviewer's
    # process may write the decision (the next use here reads the file again).
    assert isinstance(options.store, FileStore)
    await options.store.aclose()
    console.print(f"status: [bold]{first.status.code}[/] ({first.status.message})")
    [request] = first.pending_approvals
    console.print(f"pending approval {request.id} (scope {request.scope})")
    console.print(f"  request_hash {request.request_hash}")

    console.rule("2. a reviewer approves from another process (oma approvals decide)")
    reviewer = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oma_actors.cli.main", "approvals", "decide", request.id,
        "--store", str(state), "--approve", "--reviewer", "editor@example.com",
        "--hash", request.request_hash,
    )  # fmt: skip
    if await reviewer.wait() != 0:
        console.print("[red]the reviewer's decision was refused[/]")
        return 1

    console.rule("3. restore: the approved call runs once, the run completes")
    resumed = OpenMultiAgent(on_progress=lambda e: show_event(console, e), on_tool_call=gate)
    result = await resumed.restore(demo_team(out_dir), checkpoint=checkpoint_options(out_dir))
    show_result(console, result, out_dir)
    decision = result.approval_decisions[0]
    console.print(
        f"decision: {decision.decision} by {decision.reviewer.id} at {decision.decided_at}"
    )
    return 0 if result.success else 1
