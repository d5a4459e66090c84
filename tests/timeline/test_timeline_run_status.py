"""The timeline's run status is the snapshot's (``oma checkpoint list``), spelled ``in progress``.

A failed task does not fail a run that still has work pending, in progress or blocked: OMA's
queue-v2 fixture failed ``first``, a plan revision recovered it (TQ-07) and ``second-v2`` is
pending, so the run is in progress (a restore continues it), not failed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from oma_actors import TaskState
from oma_actors.checkpoint import CheckpointSnapshot, decode
from oma_actors.timeline import build_timeline

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "oma"
NAME = "queue-v2-plan-revisions"
RUN = f"fixture-{NAME}"


def fixture_snapshot() -> CheckpointSnapshot:
    store = json.loads((FIXTURES / NAME / "store.json").read_text(encoding="utf-8"))
    (value,) = [e["value"] for e in store["entries"] if e["key"].startswith("__oma_checkpoint__/")]
    return decode(value, key="k")


def tasks_snapshot(*statuses: str) -> CheckpointSnapshot:
    tasks = tuple(
        TaskState(id=f"t{i}", title=f"t{i}", description="d", status=status, assignee="a")  # type: ignore[arg-type]
        for i, status in enumerate(statuses)
    )
    return CheckpointSnapshot(
        version=4, mode="runTasks", run_id="r", attempt=1, revision=1, created_at="", tasks=tasks
    )


def test_a_failure_recovered_by_a_plan_revision_is_in_progress() -> None:
    snapshot = fixture_snapshot()
    by_title = {task.title: task.status for task in snapshot.tasks}
    assert by_title == {
        "first": "failed", "second": "skipped", "repair": "completed", "second-v2": "pending",
    }  # fmt: skip
    assert snapshot.status == "in_progress"
    assert build_timeline(snapshot).status == "in progress"


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (("failed", "pending"), "in progress"),
        (("failed", "in_progress"), "in progress"),
        (("failed", "blocked"), "in progress"),
        (("failed", "skipped"), "failed"),
        (("completed", "failed"), "failed"),
        (("completed", "completed"), "completed"),
        (("completed", "pending"), "in progress"),
    ],
)
def test_only_a_run_with_every_task_terminal_fails(
    statuses: tuple[str, ...], expected: str
) -> None:
    snapshot = tasks_snapshot(*statuses)
    assert build_timeline(snapshot).status == expected
    assert build_timeline(snapshot).status.replace(" ", "_") == snapshot.status


def test_a_run_whose_revision_recovered_its_failure_and_completed_is_completed() -> None:
    """TQ-07: "no task `failed` (ignoring ones recovered by a plan revision)". OMA's own last
    checkpoint of the fixture's resume (``resave.json``) holds ``first`` failed (recovered by
    revision 1) and ``second`` skipped (superseded by it), the rest completed, and OMA's result
    of that resume was ``success: True``, status ``ok``."""
    resave = json.loads((FIXTURES / NAME / "resave.json").read_text(encoding="utf-8"))
    snapshot = decode(json.dumps(resave["writes"][-1]), key="k")
    by_title = {task.title: task.status for task in snapshot.tasks}
    assert by_title == {
        "first": "failed", "second": "skipped", "repair": "completed", "second-v2": "completed",
    }  # fmt: skip
    assert snapshot.status == "completed"
    assert build_timeline(snapshot).status == "completed"


@pytest.mark.parametrize(
    ("recovered", "superseded", "expected"),
    [
        (1, 1, "completed"),
        (None, 1, "failed"),  # an unrecovered failure fails the run
        (1, None, "failed"),  # a task skipped that no revision superseded: as before
    ],
)
def test_only_what_a_revision_replaced_is_ignored(
    recovered: int | None, superseded: int | None, expected: str
) -> None:
    failed, skipped, done = tasks_snapshot("failed", "skipped", "completed").tasks
    snapshot = replace(
        tasks_snapshot(),
        tasks=(
            replace(failed, recovered_by_revision=recovered),
            replace(skipped, superseded_by_revision=superseded),
            done,
        ),
    )
    assert snapshot.status == expected
    assert build_timeline(snapshot).status == expected


def test_runs_show_and_checkpoint_list_agree_on_the_fixture(tmp_path: Path) -> None:
    store = tmp_path / "store.json"
    shutil.copy(FIXTURES / NAME / "store.json", store)
    os.chmod(store, 0o600)

    def oma(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "oma_actors.cli.main", *args, "--store", str(store)],
            capture_output=True, text=True, timeout=60, check=True,
            env={**os.environ, "COLUMNS": "120"},
        )  # fmt: skip
        return done.stdout

    (listed,) = json.loads(oma("checkpoint", "list", "--json"))
    assert listed["status"] == "in_progress"
    assert json.loads(oma("runs", "show", RUN, "--json"))["status"] == "in progress"
    assert oma("runs", "show", RUN).splitlines()[0].endswith("in progress")
