"""The test kit's crash points by boundary (``oma_actors.testing.crash_points``).

Parsing and counting are tested in-process with a handler that records instead of exiting;
separate processes show that a crash point really ends the process, with its exit code, at the
named boundary of a real run (and that the SIGKILL variant stops there too).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from crash_checks import effect_counts, in_flight
from crash_harness import ROOT, Scenario, run_process
from fault_harness import Harness

from oma_actors.checkpoint.boundaries import BOUNDARIES, Boundary, BoundaryPoint, Phase, report
from oma_actors.errors import ConfigurationError
from oma_actors.stores import FileStore
from oma_actors.testing.crash_points import (
    CRASH_EXIT,
    CrashPoint,
    CrashPointError,
    crash_at,
)

pytestmark = pytest.mark.crash


def at(
    boundary: Boundary, phase: Phase, *, task: str | None = None, durable: bool | None = None
) -> BoundaryPoint:
    """A boundary report as a writer makes it."""
    return BoundaryPoint(run_id="r", boundary=boundary, phase=phase, task_id=task, durable=durable)


class Recorded:
    """A crash handler that records the crash instead of exiting."""

    def __init__(self) -> None:
        self.crashes: list[tuple[CrashPoint, BoundaryPoint]] = []

    def __call__(self, point: CrashPoint, where: BoundaryPoint) -> None:
        self.crashes.append((point, where))


# -- parsing ------------------------------------------------------------------------------------


def test_parse_reads_boundary_phase_count_and_task() -> None:
    point = CrashPoint.parse("tool_commit:after:2@alpha")
    assert (point.boundary, point.phase, point.nth, point.task_id) == (
        "tool_commit",
        "after",
        2,
        "alpha",
    )
    assert point.exit_code == CRASH_EXIT
    plain = CrashPoint.parse("terminal:before")
    assert (plain.nth, plain.task_id) == (1, None)
    assert CrashPoint.parse("admission:after", exit_code=9).exit_code == 9


@pytest.mark.parametrize("boundary", sorted(BOUNDARIES))
def test_every_boundary_parses_and_spells_back(boundary: str) -> None:
    for spelling in (f"{boundary}:before", f"{boundary}:after:3", f"{boundary}:after@t:1"):
        assert CrashPoint.parse(spelling).spelling == spelling
    assert CrashPoint.parse(f"{boundary}:after:1").spelling == f"{boundary}:after"


@pytest.mark.parametrize(
    ("spelling", "problem"),
    [
        ("tool_comit:after", "unknown boundary 'tool_comit'"),
        ("tool_commit:during", "unknown phase 'during'"),
        ("tool_commit", "expected boundary:phase[:nth][@task_id]"),
        ("tool_commit:after:2:3", "expected boundary:phase[:nth][@task_id]"),
        ("tool_commit:after:two", "nth must be a positive integer, got 'two'"),
        ("tool_commit:after:-1", "nth must be a positive integer, got '-1'"),
        ("tool_commit:after:0", "nth must be at least 1, got 0"),
        ("tool_commit:after@", "the task id after '@' is empty"),
    ],
)
def test_a_bad_spelling_is_a_typed_error_naming_the_problem(spelling: str, problem: str) -> None:
    with pytest.raises(CrashPointError) as caught:
        CrashPoint.parse(spelling)
    assert caught.value.problem.startswith(problem), caught.value.problem
    assert caught.value.spelling == spelling
    assert isinstance(caught.value, ConfigurationError)
    assert isinstance(caught.value, ValueError)


def test_an_unknown_boundary_error_lists_the_known_ones() -> None:
    with pytest.raises(CrashPointError, match=r"known: .*tool_commit"):
        CrashPoint.parse("commit:after")


@pytest.mark.parametrize(
    "fields",
    [
        {"boundary": "nope", "phase": "after"},
        {"boundary": "tool_commit", "phase": "later"},
        {"boundary": "tool_commit", "phase": "after", "nth": 0},
        {"boundary": "tool_commit", "phase": "after", "exit_code": 0},
        {"boundary": "tool_commit", "phase": "after", "exit_code": 256},
    ],
)
def test_the_constructor_validates_too(fields: dict[str, object]) -> None:
    with pytest.raises(CrashPointError):
        CrashPoint(**fields)  # type: ignore[arg-type]


def test_crash_at_rejects_a_bad_spelling_before_installing_anything() -> None:
    with pytest.raises(CrashPointError), crash_at("tool_commit:afterwards"):
        pytest.fail("the block must not run")


# -- counting -----------------------------------------------------------------------------------


def test_after_counts_only_durable_reports_of_the_task_and_fires_once_at_nth() -> None:
    recorded = Recorded()
    with crash_at("tool_commit:after:2@alpha", on_crash=recorded) as probe:
        report(at("tool_commit", "before", task="alpha"))
        report(at("tool_commit", "after", task="alpha", durable=True))  # 1st match
        report(at("tool_commit", "after", task="alpha", durable=False))  # a failed save
        report(at("tool_commit", "after", task="beta", durable=True))  # another task
        report(at("tool_results", "after", task="alpha", durable=True))  # another boundary
        assert recorded.crashes == []
        second = at("tool_commit", "after", task="alpha", durable=True)
        report(second)  # 2nd match: crash
        report(at("tool_commit", "after", task="alpha", durable=True))  # 3rd: never again
    [(point, where)] = recorded.crashes
    assert point.spelling == "tool_commit:after:2@alpha"
    assert where is second
    assert probe.fired is second
    assert probe.matched == 3
    assert len(probe.seen) == 7


def test_before_counts_every_report_whatever_the_outcome_and_any_task() -> None:
    recorded = Recorded()
    with crash_at("terminal:before:2", on_crash=recorded):
        report(at("terminal", "before", task="alpha"))
        report(at("terminal", "after", task="alpha", durable=False))
        report(at("terminal", "before", task="beta"))
    [(_, where)] = recorded.crashes
    assert where.task_id == "beta"


def test_a_crash_after_never_fires_on_a_save_that_did_not_land() -> None:
    recorded = Recorded()
    with crash_at("admission:after", on_crash=recorded) as probe:
        report(at("admission", "after", durable=False))
        report(at("admission", "after", durable=None))
    assert recorded.crashes == []
    assert probe.matched == 0


async def test_the_probe_watches_only_runs_started_inside_the_block() -> None:
    recorded = Recorded()
    started = asyncio.Event()
    release = asyncio.Event()

    async def earlier_run() -> None:  # started before the block: carries no probe
        started.set()
        await release.wait()
        report(at("admission", "before"))

    outside = asyncio.ensure_future(earlier_run())
    await started.wait()

    async def later_run() -> None:  # started inside the block: inherits the probe
        report(at("admission", "before"))

    with crash_at("admission:before", on_crash=recorded):
        inside = asyncio.ensure_future(later_run())
        release.set()
        await outside
        await inside
    report(at("admission", "before"))  # after the block: gone
    assert len(recorded.crashes) == 1


# -- a real run reports the boundaries the crash matrix names ----------------------------------


async def test_a_run_reports_each_boundary_before_and_after_with_its_task(tmp_path: Path) -> None:
    recorded = Recorded()
    h = Harness(tmp_path)
    with crash_at("task_completed:after@beta", on_crash=recorded) as probe:
        result = await h.run(FileStore(h.path))
    assert result.success
    befores = [(p.boundary, p.task_id) for p in probe.seen if p.phase == "before"]
    assert befores == [
        ("admission", None),
        ("assistant_tool_turn", "alpha"),
        ("tool_commit", "alpha"),
        ("tool_results", "alpha"),
        ("terminal", "alpha"),
        ("task_completed", "alpha"),
        ("terminal", "beta"),
        ("task_completed", "beta"),
    ]
    # Every save is reported twice, in order, and every save of this run landed.
    pairs = list(zip(probe.seen[::2], probe.seen[1::2], strict=True))
    for before, after in pairs:
        assert (before.phase, after.phase) == ("before", "after")
        assert (before.boundary, before.task_id) == (after.boundary, after.task_id)
        assert after.durable is True
        assert after.revision == before.revision
    assert [b.revision for b, _ in pairs] == list(range(1, len(pairs) + 1))
    assert [(p.boundary, p.task_id) for _, p in recorded.crashes] == [("task_completed", "beta")]


# -- in a real process --------------------------------------------------------------------------

SYNTHETIC = textwrap.dedent(
    """
    import os, sys
    from oma_actors.checkpoint.boundaries import BoundaryPoint, report
    from oma_actors.testing.crash_points import CrashPoint, block_until_killed, crash_at

    handler = {"exit": None, "kill": block_until_killed}[sys.argv[1]]
    kwargs = {} if handler is None else {"on_crash": handler}
    point = BoundaryPoint(run_id="r", boundary="tool_commit", phase="after", task_id="t",
                          revision=4, durable=True)
    try:
        with crash_at(CrashPoint.parse("tool_commit:after:2", exit_code=77), **kwargs):
            report(point)
            os.write(2, b"first report survived\\n")
            report(point)
            os.write(2, b"second report survived\\n")
    finally:
        os.write(2, b"finally ran\\n")
    """
)


def test_the_process_exits_with_the_code_at_the_nth_report_and_runs_no_cleanup() -> None:
    child = run_process(
        [sys.executable, "-c", SYNTHETIC, "exit"], expect=77, what="synthetic crash"
    )
    assert child.stderr.splitlines() == [
        "first report survived",
        "crash_at: os._exit(77) at tool_commit:after:2 (run r, task t, revision 4, durable True)",
    ]


def test_the_sigkill_variant_blocks_at_the_boundary_until_killed() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SYNTHETIC, "kill"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=30)
    assert line.startswith("READY tool_commit:after:2 (run r, task t, revision 4")
    assert proc.returncode == -signal.SIGKILL
    assert stderr.splitlines() == ["first report survived"]


def test_a_crash_child_dies_at_the_named_boundary_of_a_real_run(tmp_path: Path) -> None:
    sc = Scenario(tmp_path, "chain")
    p1 = sc.run(crash="tool_commit:after@alpha", expect=CRASH_EXIT)  # checks stderr names it
    assert "(run crash-run, task alpha, revision 3, durable True)" in p1.stderr
    snapshot = sc.snapshot()
    assert snapshot is not None
    assert snapshot["revision"] == 3  # admission, assistant turn, the commit
    [call] = in_flight(snapshot)["pendingToolCalls"]  # type: ignore[index]
    assert "commit" in call  # "after" means the commit is durable
    assert effect_counts(sc.effects()) == {"alpha-t0-A": 1}
    assert [c["turn"] for c in sc.model_calls()] == [0]  # nothing after the boundary ran


def test_a_crash_child_killed_at_a_boundary(tmp_path: Path) -> None:
    sc = Scenario(tmp_path, "chain")
    sc.run_until_ready_then_kill(crash="kill:tool_commit:before@alpha")  # checks READY names it
    snapshot = sc.snapshot()
    assert snapshot is not None
    [call] = in_flight(snapshot)["pendingToolCalls"]  # type: ignore[index]
    assert "commit" not in call  # "before": the commit never started


def test_a_crash_child_refuses_an_unknown_boundary(tmp_path: Path) -> None:
    sc = Scenario(tmp_path, "chain")
    cmd = sc.command(crash="tool_comit:after")
    child = run_process(cmd, expect=2, what="crash child with a misspelt crash point")
    assert "unknown boundary 'tool_comit'" in child.stderr
