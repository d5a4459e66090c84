"""Tests of ``event_loop_factory`` and of the kernel's public surface."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass

import pytest
import uvloop

import oma_actors.actors
from oma_actors.actors import Actor, ActorSystem, event_loop_factory

# A kernel bug tends to hang rather than fail; keep such a hang short.
pytestmark = pytest.mark.timeout(10)


@dataclass(frozen=True, slots=True)
class Ping:
    n: int


class Echo(Actor[Ping]):
    async def receive(self, message: Ping) -> object:
        return message.n


async def _round_trip() -> tuple[object, str]:
    async with ActorSystem() as system:
        answer = await system.spawn(Echo).ask(Ping(7), timeout=1.0)
    return answer, type(asyncio.get_running_loop()).__module__


def test_the_factory_is_uvloop_when_installed() -> None:
    factory = event_loop_factory()
    assert factory is uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        answer, loop_module = runner.run(_round_trip())
    assert answer == 7
    assert loop_module.startswith("uvloop")


def test_the_factory_is_none_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # makes ``import uvloop`` fail
    factory = event_loop_factory()
    assert factory is None
    with asyncio.Runner(loop_factory=factory) as runner:
        answer, loop_module = runner.run(_round_trip())
    assert answer == 7
    assert loop_module.startswith("asyncio")


def test_the_public_names_are_exactly_all_and_sorted() -> None:
    exported = oma_actors.actors.__all__
    assert exported == sorted(exported)
    public = {name for name in vars(oma_actors.actors) if not name.startswith("_")}
    # Submodules are attributes of a package too; they are not part of the curated surface.
    modules = {"actor", "annotations", "cell", "loop", "mailbox", "ref", "supervision", "system"}
    assert public - modules == set(exported)
