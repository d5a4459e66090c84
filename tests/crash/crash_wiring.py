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

A crash ends the process with exit code 86 (``os._exit``: no ``finally``, no buffered I/O); the
``kill:*`` points instead print ``READY`` and block until the parent sends SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import aiofiles.os
from crash_ledger import append_line, event_record, events_file

from oma_actors import ApprovalPending, ProgressEvent, ToolCalled
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
    """

    boundary: CrashPoint | None = None
    on_crash: CrashHandler = exit_process
    tool: str | None = None
    model: tuple[str, str] | None = None
    hook: str | None = None
    replace_kill: bool | None = None


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

    Only the write whose new checkpoint holds a commit of alpha's call is stopped: with
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
            return _holds_a_commit(json.loads(entry["value"]))
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


def _holds_a_commit(snapshot: dict[str, Any]) -> bool:
    """Alpha's turn is executing tools and one of its calls has a commit record."""
    ids = {task.get("title"): task.get("id") for task in snapshot["queue"]["tasks"]}
    for entry in snapshot.get("inFlightTasks") or []:
        if entry.get("taskId") == ids.get("alpha") and entry.get("phase") == "executing_tools":
            return any(c.get("commit") is not None for c in entry.get("pendingToolCalls") or [])
    return False
