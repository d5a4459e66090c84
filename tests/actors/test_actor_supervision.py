"""Tests of the supervision policies: stop, restart (within and past its budget), escalate."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import assert_never

import pytest

from oma_actors.actors import Actor, ActorRef, ActorSystem, Supervision, SupervisionKind
from oma_actors.actors.supervision import RestartBudget
from oma_actors.errors import ActorFailedError, ActorStoppedError, ConfigurationError

# A kernel bug tends to hang rather than fail; keep such a hang short.
pytestmark = pytest.mark.timeout(10)


class Boom(Exception):
    """The failure the tests inject."""


@dataclass(frozen=True, slots=True)
class Fail:
    pass


@dataclass(frozen=True, slots=True)
class Count:
    pass


@dataclass(frozen=True, slots=True)
class Hold:
    release: asyncio.Event


Msg = Fail | Count | Hold


@dataclass
class Journal:
    """What happened to every instance a factory built, shared across restarts."""

    started: int = 0
    stopped: int = 0
    fail_on_start: int = 0  # how many on_start calls fail before one succeeds


class Worker(Actor[Msg]):
    """Counts messages per instance; ``Fail`` raises ``Boom``."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.count = 0

    async def on_start(self) -> None:
        if self.journal.fail_on_start > 0:
            self.journal.fail_on_start -= 1
            raise Boom("on_start")
        self.journal.started += 1

    async def on_stop(self) -> None:
        self.journal.stopped += 1

    async def receive(self, message: Msg) -> object:
        match message:
            case Fail():
                raise Boom("receive")
            case Count():
                self.count += 1
                return self.count
            case Hold(release=release):
                await release.wait()
                return None
            case _:
                assert_never(message)


async def _stopped(ref: ActorRef[Msg]) -> None:
    """Wait until the actor has stopped (its mailbox loop ended and on_stop ran)."""
    await ref.stop()


# --- stop -------------------------------------------------------------------------------------


async def test_stop_policy_gives_the_error_to_the_asker_and_fails_queued_asks() -> None:
    journal = Journal()
    async with ActorSystem() as system:
        ref = system.spawn(Worker(journal))
        async with asyncio.TaskGroup() as tg:
            failing = tg.create_task(_capture(ref.ask(Fail(), timeout=1.0)))
            queued = tg.create_task(_capture(ref.ask(Count(), timeout=1.0)))
        assert isinstance(failing.result(), Boom)
        assert isinstance(queued.result(), ActorStoppedError)
        assert not ref.is_alive
        with pytest.raises(ActorStoppedError):
            ref.tell(Count())
    assert journal.stopped == 1


async def test_stop_policy_logs_a_failing_tell(caplog: pytest.LogCaptureFixture) -> None:
    journal = Journal()
    with caplog.at_level(logging.ERROR, logger="oma_actors.actors"):
        async with ActorSystem() as system:
            ref = system.spawn(Worker(journal), name="w")
            ref.tell(Fail())
            await _stopped(ref)
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) == 1
    assert "'w'" in failures[0].getMessage()
    assert failures[0].exc_info is not None
    assert isinstance(failures[0].exc_info[1], Boom)


async def test_a_failing_on_start_stops_the_actor_and_fails_its_asks() -> None:
    journal = Journal(fail_on_start=1)
    async with ActorSystem() as system:
        ref = system.spawn(Worker(journal))
        with pytest.raises(ActorStoppedError):
            await ref.ask(Count(), timeout=1.0)
    assert journal.started == 0
    assert journal.stopped == 0  # on_stop runs only for instances that started


# --- restart ----------------------------------------------------------------------------------


async def test_restart_continues_with_a_fresh_instance_and_the_rest_of_the_mailbox() -> None:
    journal = Journal()
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Worker(journal), supervision=Supervision.restart(2, 60.0))
        ref.tell(Count())
        ref.tell(Count())
        ref.tell(Fail())
        ref.tell(Count())  # queued behind the failure: handled by the fresh instance
        assert await ref.ask(Count()) == 2  # a fresh instance counts from zero
        with pytest.raises(Boom):
            await ref.ask(Fail())
        assert await ref.ask(Count()) == 1
        assert ref.is_alive
    assert journal.started == 3
    assert journal.stopped == 3  # two restarts plus the final shutdown


async def test_restart_past_its_budget_stops_the_actor(caplog: pytest.LogCaptureFixture) -> None:
    journal = Journal()
    caplog.set_level(logging.WARNING, logger="oma_actors.actors")
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Worker(journal), supervision=Supervision.restart(1, 60.0))
        with pytest.raises(Boom):
            await ref.ask(Fail())
        assert await ref.ask(Count()) == 1  # restarted once
        with pytest.raises(Boom):
            await ref.ask(Fail())  # the second failure is over the budget
        with pytest.raises(ActorStoppedError):
            await ref.ask(Count())
        assert not ref.is_alive
    assert journal.started == 2
    assert journal.stopped == 2
    assert any("stopped after a failure" in r.getMessage() for r in caplog.records)


async def test_restart_retries_a_failing_on_start_within_the_budget() -> None:
    journal = Journal(fail_on_start=2)
    async with ActorSystem() as system:
        ref = system.spawn(lambda: Worker(journal), supervision=Supervision.restart(2, 60.0))
        assert await ref.ask(Count(), timeout=1.0) == 1
    assert journal.started == 1


def test_restart_budget_is_a_sliding_window() -> None:
    budget = RestartBudget(Supervision.restart(max_restarts=2, within_seconds=10.0))
    assert budget.take(0.0)
    assert budget.take(1.0)
    assert not budget.take(5.0)  # two restarts already inside [−5, 5]
    assert budget.take(10.5)  # the one at 0.0 has left the window
    assert not budget.take(10.9)
    assert budget.take(11.5)


async def test_restart_needs_a_factory() -> None:
    async with ActorSystem() as system:
        with pytest.raises(ConfigurationError):
            system.spawn(Worker(Journal()), supervision=Supervision.restart())


def test_supervision_values_are_validated_and_frozen() -> None:
    assert Supervision.stop().kind is SupervisionKind.STOP
    assert Supervision.escalate().kind is SupervisionKind.ESCALATE
    assert Supervision.restart() == Supervision.restart(max_restarts=3, within_seconds=60.0)
    with pytest.raises(ConfigurationError):
        Supervision.restart(max_restarts=-1)
    with pytest.raises(ConfigurationError):
        Supervision.restart(within_seconds=0)
    policy = Supervision.stop()
    with pytest.raises(AttributeError):
        policy.kind = SupervisionKind.RESTART  # type: ignore[misc]


# --- escalate ---------------------------------------------------------------------------------


async def test_escalate_interrupts_the_body_and_raises_actor_failed() -> None:
    journal = Journal()
    refs: list[ActorRef[Msg]] = []
    interrupted: list[bool] = []

    async def scenario() -> None:
        async with ActorSystem() as system:
            refs.append(system.spawn(Worker(journal), name="bystander"))
            failing = system.spawn(Worker(Journal()), name="failing", supervision=ESCALATE)
            failing.tell(Fail())
            try:
                async with asyncio.timeout(2):
                    await asyncio.Event().wait()
            except asyncio.CancelledError:
                interrupted.append(True)
                raise

    with pytest.raises(ActorFailedError) as info:
        await scenario()
    assert interrupted == [True]
    (bystander,) = refs
    assert info.value.actor == "failing"
    assert isinstance(info.value.__cause__, Boom)
    assert not bystander.is_alive
    assert journal.stopped == 1  # the other actors were stopped too
    current = asyncio.current_task()
    assert current is not None
    assert current.cancelling() == 0  # the system took back the cancellation it requested
    assert asyncio.all_tasks() == {current}


async def test_escalate_from_an_ask_in_the_body_raises_actor_failed() -> None:
    async def scenario() -> None:
        async with ActorSystem() as system:
            ref = system.spawn(Worker(Journal()), supervision=ESCALATE)
            await ref.ask(Fail())

    with pytest.raises(ActorFailedError) as info:
        await scenario()
    assert isinstance(info.value.__cause__, Boom)


async def test_escalate_fails_the_pending_asks_of_other_actors() -> None:
    pending: list[asyncio.Task[object]] = []

    async def scenario(outer: asyncio.TaskGroup) -> None:
        async with ActorSystem() as system:
            blocked = system.spawn(Worker(Journal()))
            pending.append(
                outer.create_task(_capture(blocked.ask(Hold(asyncio.Event()), timeout=1.0)))
            )
            await asyncio.sleep(0.01)
            system.spawn(Worker(Journal()), supervision=ESCALATE).tell(Fail())
            async with asyncio.timeout(5):
                await asyncio.Event().wait()

    async with asyncio.TaskGroup() as outer:
        with pytest.raises(ActorFailedError):
            await scenario(outer)
    assert isinstance(pending[0].result(), ActorStoppedError)


async def test_escalate_during_the_drain_still_raises_actor_failed() -> None:
    async def scenario() -> None:
        async with ActorSystem() as system:
            ref = system.spawn(Worker(Journal()), supervision=ESCALATE)
            ref.tell(Fail())  # processed while __aexit__ drains

    with pytest.raises(ActorFailedError):
        await scenario()


async def test_a_real_cancellation_wins_over_an_escalation() -> None:
    async def run() -> None:
        me = asyncio.current_task()
        assert me is not None
        async with ActorSystem() as system:
            ref = system.spawn(Worker(Journal()), supervision=ESCALATE)
            ref.tell(Fail())
            me.cancel()
            await asyncio.sleep(1)

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(run())
    assert task.cancelled()


ESCALATE = Supervision.escalate()


async def _capture(awaitable: Awaitable[object]) -> object:
    """Await an ask and return its result or the exception it raised."""
    try:
        return await awaitable
    except Exception as exc:
        return exc
