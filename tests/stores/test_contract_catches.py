"""The conditional and ownership contracts can fail: each broken store here breaks one rule.

A contract that every store passes proves nothing unless a store that breaks a rule fails it,
with a message that names the rule. Each class below is ``InMemoryStore`` (or ``FileStore``)
with exactly one defect in ``apply``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from oma_actors.stores import Expect, FileStore, InMemoryStore, MemoryStore, Put, Remove, Write
from oma_actors.stores.entries import checks_hold
from oma_actors.testing.store_contract import check_conditional_store, check_run_ownership


class IgnoresChecks(InMemoryStore):
    """Writes whatever the checks say: a stale owner's write lands."""

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        held = checks_hold(self._entries, checks)
        await super().apply([], writes)
        return held


class ClaimsToWin(InMemoryStore):
    """Writes nothing on a mismatch but reports success: the loser never learns it lost."""

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        await super().apply(checks, writes)
        return True


class WritesWhileChecking(InMemoryStore):
    """Writes once every check but the last held, so a late mismatch leaves the writes in place."""

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        if not checks_hold(self._entries, checks[:-1]):
            return False
        last_holds = checks_hold(self._entries, checks[-1:])
        await super().apply([], writes)
        return last_holds


class YieldsBeforeWriting(InMemoryStore):
    """Checks, yields to the loop, then writes: two racing callers can both win."""

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        if not checks_hold(self._entries, checks):
            return False
        await asyncio.sleep(0)
        return await super().apply([], writes)


class WritesOneAtATime(InMemoryStore):
    """Applies a batch one write per loop turn: a reader sees it half done."""

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        if not checks_hold(self._entries, checks):
            return False
        for write in writes:
            await super().apply([], [write])
            await asyncio.sleep(0)
        return True


class LeaksStaleWritesToDisk(FileStore):
    """Refuses a stale write in its mirror but lets it reach the file: only a re-open shows it."""

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        if await super().apply(checks, writes):
            return True
        leak = FileStore(self.path)
        await leak.apply([], [w for w in writes if isinstance(w, Put | Remove)])
        return False


@pytest.mark.parametrize(
    ("store", "rule"),
    [
        (IgnoresChecks, "a_mismatch_writes_nothing"),
        (ClaimsToWin, "a_mismatch_writes_nothing"),
        (WritesWhileChecking, "a_mismatch_writes_nothing"),
        (YieldsBeforeWriting, "concurrent_applies_have_one_winner"),
        (WritesOneAtATime, "several_keys_land_together"),
    ],
)
async def test_the_conditional_contract_names_the_broken_rule(
    store: type[InMemoryStore], rule: str
) -> None:
    with pytest.raises(AssertionError, match=f"conditional store: {rule}: "):
        await check_conditional_store(store)


@pytest.mark.parametrize(
    ("store", "rule", "detail"),
    [
        (IgnoresChecks, "superseded_owner_write_never_lands", "holds"),
        (ClaimsToWin, "superseded_owner_write_never_lands", "the loser must learn it lost"),
        (YieldsBeforeWriting, "racing_takeovers_have_one_owner_per_token", "expected 1"),
    ],
)
async def test_the_ownership_contract_names_the_broken_rule(
    store: type[InMemoryStore], rule: str, detail: str
) -> None:
    with pytest.raises(AssertionError, match=rf"run ownership: {rule}: .*{detail}"):
        await check_run_ownership(store)


async def test_the_ownership_contract_reads_back_what_is_durable(tmp_path: Path) -> None:
    paths = (tmp_path / f"s{i}.json" for i in range(100))

    def make() -> LeaksStaleWritesToDisk:
        return LeaksStaleWritesToDisk(next(paths))

    def reopen(store: LeaksStaleWritesToDisk) -> MemoryStore:
        return FileStore(store.path)

    await check_run_ownership(make)  # the writer's own instance looks right...
    with pytest.raises(AssertionError, match=r"superseded_owner_write_never_lands: .*durably"):
        await check_run_ownership(make, reopen=reopen)  # ...but the file does not
