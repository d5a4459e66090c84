"""Where a crash child dies: the ``--crash`` spellings and what each one installs.

Most rows of the crash matrix die at a **durable boundary of the run**, spelled as the test kit
spells it (``oma_actors.testing.crash_points``): ``boundary:phase[:nth][@task_id]``, for example
``assistant_tool_turn:after@alpha`` or ``task_completed:after@alpha``. The child runs the
scenario inside ``crash_at(point)``, so the point is reached whatever the save path writes
(a snapshot file today, a journal or a database later) and the rows never look at store bytes.

The other spellings name places that are not save boundaries, each kept for a reason:

- ``tool:*`` (and ``kill:tool_after_effect``): inside the tool, around its external effect
  (C03a/b/c, C11b). The effect is not a write of run state, so no boundary reports it.
- ``model:synthesis``: inside the coordinator's synthesis model call (C09a).
- ``hook:tool_called``: in the ``on_progress`` hook, after a fresh ``ToolCalled`` (C15).
- ``kill:approval_pending``: SIGKILL right after ``ApprovalPending`` was emitted (C10b): the row
  is about "reported", which is an event, not a save.
- ``exit:replace_commit`` / ``kill:replace_commit``: inside ``FileStore``'s atomic write,
  between the fsynced temp file and the rename (C06). That row is about the FileStore's bytes
  (the target still holds the previous revision, the orphan temp is never read), so it stays a
  store-level fault and parses the temp file's JSON on purpose.
- ``kill:<boundary spelling>``: a boundary point with the M-kill variant (READY, then SIGKILL).
- ``journal:torn_result``: with ``--journal``, the append that carries the first ``tool/result``
  writes the lines before it, then half of that line, and exits (C12a): a torn trailing line,
  which is the journal's bytes, not a boundary.

A crash ends the process with exit code 86 (``os._exit``: no ``finally``, no buffered I/O); the
``kill:*`` points instead print ``READY`` and block until the parent sends SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import aiofiles.os
from crash_ledger import append_line, event_record, events_file

from oma_actors.events import ApprovalPending, ProgressEvent, ToolCalled
from oma_actors.journal import JournalEvent, RunJournal, to_json_line
from oma_actors.testing.crash_points import (
    CRASH_EXIT,
    CrashHandler,
    CrashPoint,
    CrashPointError,
    block_until_killed,
    exit_process,
)

TOOL_CRASHES = {
    "tool:before_effect": "before_effect",
    "tool:after_effect": "after_effect",
    "tool:after_return": "after_return",
    "kill:tool_after_effect": "kill_after_effect",
}
MODEL_CRASHES = {"model:synthesis": ("coordinator", "synthesis")}
HOOK_CRASHES = ("hook:tool_called", "kill:approval_pending")
FILESTORE_CRASHES = {"exit:replace_commit": False, "kill:replace_commit": True}  # value: SIGKILL
JOURNAL_CRASHES = {"journal:torn_result": "tool/result"}  # value: the event type torn


def crash_now(reason: str) -> NoReturn:
    """End the process like a crash: exit code 86, nothing flushed or cleaned up."""
    os.write(2, f"crash_child: os._exit({CRASH_EXIT}) at {reason}\n".encode())
    os._exit(CRASH_EXIT)


def ready_and_block(reason: str) -> NoReturn:
    """Tell the parent we reached the crash point, then block (the parent sends SIGKILL)."""
    os.write(1, f"READY {reason}\n".encode())
    os.read(0, 1)  # the parent never writes; EOF means the parent is gone
    os._exit(87)


@dataclass(frozen=True, slots=True)
class CrashPlan:
    """What one ``--crash`` spelling installs in the child (at most one field is set).

    Attributes:
        boundary: a boundary crash point, run inside ``crash_at``.
        on_crash: how the boundary point ends the process (M-exit or M-kill).
        tool: the ledger tool's crash (``ToolBehaviour.crash``).
        model: ``(role, task)`` of the model call that crashes.
        hook: ``hook:tool_called`` or ``kill:approval_pending`` (the progress sink).
        replace_kill: C06: stop the FileStore rename (``True``: SIGKILL, ``False``: exit).
        journal_tear: C12a: the journal event type whose line is torn (``TearingJournal``).
    """

    boundary: CrashPoint | None = None
    on_crash: CrashHandler = exit_process
    tool: str | None = None
    model: tuple[str, str] | None = None
    hook: str | None = None
    replace_kill: bool | None = None
    journal_tear: str | None = None


NO_CRASH = CrashPlan()


def plan_crash(spelling: str) -> CrashPlan:
    """The ``CrashPlan`` of a ``--crash`` spelling (an ``argparse`` type).

    Raises:
        argparse.ArgumentTypeError: neither a named point nor a boundary spelling; the message
            is the kit's, naming the unknown boundary or phase.
    """
    if spelling in TOOL_CRASHES:
        return CrashPlan(tool=TOOL_CRASHES[spelling])
    if spelling in MODEL_CRASHES:
        return CrashPlan(model=MODEL_CRASHES[spelling])
    if spelling in HOOK_CRASHES:
        return CrashPlan(hook=spelling)
    if spelling in FILESTORE_CRASHES:
        return CrashPlan(replace_kill=FILESTORE_CRASHES[spelling])
    if spelling in JOURNAL_CRASHES:
        return CrashPlan(journal_tear=JOURNAL_CRASHES[spelling])
    kill = spelling.startswith("kill:")
    try:
        point = CrashPoint.parse(spelling.removeprefix("kill:"))
    except CrashPointError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return CrashPlan(boundary=point, on_crash=block_until_killed if kill else exit_process)


def make_sink(ledger: Path, hook: str | None) -> Callable[[ProgressEvent], None]:
    """The ``on_progress`` sink: logs every event; ``hook`` may end the process.

    ``hook:tool_called`` exits on a fresh ``ToolCalled`` (published after the commit save,
    S3 before H). ``kill:approval_pending`` reports READY (and blocks for SIGKILL) once an
    ``ApprovalPending`` was emitted, i.e. once the suspension is durable and reported.
    """
    events = ledger / events_file(os.getpid())

    def sink(event: ProgressEvent) -> None:
        append_line(events, event_record(event))
        if hook == "hook:tool_called" and isinstance(event, ToolCalled) and not event.replayed:
            crash_now(f"on_progress hook after ToolCalled {event.tool_call_id}")
        if hook == "kill:approval_pending" and isinstance(event, ApprovalPending):
            ready_and_block(f"ApprovalPending {event.request.id}")

    return sink


def patch_replace(store_path: str, checkpoint_key: str, *, kill: bool) -> None:
    """Stop a FileStore write of ``store_path`` after its temp file is written, before the rename.

    Only the first write whose new checkpoint holds alpha's tool result is stopped (a commit of
    its call; journal-first, where commits are journal appends, the first compaction that holds
    alpha finished, ``_holds_alpha_result``): with
    ``kill`` the child prints READY and blocks for SIGKILL, otherwise it exits with 86.
    Both ``os.replace`` and ``aiofiles.os.replace`` (which binds ``os.replace`` at import) are
    patched, whichever the store uses. This is the one crash point that reads the store's
    bytes: C06 is a row about those bytes.
    """
    original_os = os.replace
    original_aio = aiofiles.os.replace

    def stop_here(src: Any, dst: Any) -> bool:
        if os.path.abspath(os.fspath(dst)) != store_path:
            return False
        try:
            document = json.loads(Path(os.fspath(src)).read_bytes())
            entry = next(e for e in document["entries"] if e["key"] == checkpoint_key)
            return _holds_alpha_result(json.loads(entry["value"]))
        except (StopIteration, KeyError, ValueError, OSError):
            return False

    def stop(src: Any) -> None:
        reason = f"rename of {os.path.basename(os.fspath(src))}"
        if kill:
            ready_and_block(reason)
        crash_now(reason)

    def patched_os(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if stop_here(src, dst):
            stop(src)
        original_os(src, dst, *args, **kwargs)

    async def patched_aio(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if stop_here(src, dst):
            stop(src)
        await original_aio(src, dst, *args, **kwargs)

    os.replace = patched_os
    aiofiles.os.replace = patched_aio


def _holds_alpha_result(snapshot: dict[str, Any]) -> bool:
    """One of alpha's calls has a commit record, or alpha is completed (its result is in)."""
    ids = {task.get("title"): task.get("id") for task in snapshot["queue"]["tasks"]}
    if ids.get("alpha") in snapshot["queue"].get("completed", []):
        return True
    for entry in snapshot.get("inFlightTasks") or []:
        if entry.get("taskId") != ids.get("alpha"):
            continue
        if entry.get("phase") == "completed":
            return True
        if entry.get("phase") == "executing_tools":
            return any(c.get("commit") is not None for c in entry.get("pendingToolCalls") or [])
    return False


class TearingJournal:
    """A ``RunJournal`` that dies mid-append: half of the first ``tear`` event's line (C12a).

    The events before it in the same append go through the real journal (written, fsynced);
    then half of the torn event's line is appended to the file with its own descriptor and
    fsynced, and the process exits: what a crash in the middle of a ``write`` leaves.
    """

    def __init__(self, inner: RunJournal, path: Path, *, tear: str) -> None:
        self._inner = inner
        self._path = path
        self._tear = tear

    async def append(self, events: Sequence[JournalEvent]) -> None:
        """Append ``events``; tear the first of type ``tear`` and exit."""
        torn = next((i for i, event in enumerate(events) if event.type == self._tear), None)
        if torn is None:
            await self._inner.append(events)
            return
        if torn:
            await self._inner.append(events[:torn])
        line = to_json_line(events[torn]).encode()
        append_bytes(self._path, line[: len(line) // 2])
        crash_now(f"torn journal line: {self._tear} seq {events[torn].seq}")

    async def read_from(self, seq: int) -> list[JournalEvent]:
        """The inner journal's events from ``seq``."""
        return await self._inner.read_from(seq)

    async def close(self) -> None:
        """Close the inner journal."""
        await self._inner.close()

    def describe(self) -> dict[str, Any]:
        """The inner journal's reference (the snapshot's ``journalRef``)."""
        return dict(self._inner.describe())


def append_bytes(path: Path, data: bytes) -> None:
    """Append raw bytes with one ``O_APPEND`` write and fsync them."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
