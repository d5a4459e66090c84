"""The contract of ``ConditionalStore.apply`` and of run ownership, as plain async checks.

``check_conditional_store`` states what ``apply(checks, writes)`` means: all writes or none,
a mismatch writes nothing, ``None`` expects an absent key, deletes, several keys, concurrent
callers. ``check_run_ownership`` states what a fenced write is for, in the spirit of langgraph's
checkpoint conformance ``ownership.py``: two owners of one run share a fence key
(``__oma_run__/<runId>``) holding a fencing token; each snapshot write is guarded by the writer's
token; after a takeover the superseded owner's write never lands, and it learns it lost (its
``apply`` returns ``False``). Both are re-exported by ``oma_actors.testing.store_contract``.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, TypeAlias, TypeVar, cast

from oma_actors.keyspace import checkpoint_key, run_record_key
from oma_actors.stores.base import ConditionalStore, Expect, MemoryStore, Put, Remove
from oma_actors.testing._contract import (
    TICK,
    entry_of,
    expect,
    keys_of,
    made,
    run_checks,
    value_of,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from oma_actors.stores.base import Write

_C = TypeVar("_C", bound=ConditionalStore)
Readback: TypeAlias = "Callable[[MemoryStore], Awaitable[MemoryStore]]"
"""Returns the durable view of a store: itself, or a re-opened instance over its state."""

RUN_FENCE = run_record_key("r1")
"""The fence key of the run both owners claim in ``check_run_ownership``."""

RUN_SNAPSHOT = checkpoint_key("r1")
"""The snapshot key both owners write in ``check_run_ownership``."""


async def check_conditional_store(make_store: Callable[[], _C | Awaitable[_C]]) -> None:
    """Check ``apply``: all-or-nothing writes guarded by several checks, and its races.

    Raises:
        AssertionError: The store breaks the contract; the message names the failing check.
    """
    await run_checks("conditional store", make_store, _CONDITIONAL_CHECKS)


async def check_run_ownership(
    make_store: Callable[[], _C | Awaitable[_C]],
    reopen: Callable[[_C], MemoryStore | Awaitable[MemoryStore]] | None = None,
) -> None:
    """Check that a superseded owner's fenced write never lands, and that the loser is told.

    Args:
        make_store: Returns a fresh, empty store per check.
        reopen: Optional; returns a NEW instance over the same durable state as the given store
            (e.g. ``lambda s: FileStore(s.path)``). With it, every "never lands" is also checked
            against what is durable, not only against the writer's instance.

    Raises:
        AssertionError: The store breaks the contract; the message names the failing check.
    """

    async def readback(store: MemoryStore) -> MemoryStore:
        return store if reopen is None else await made(reopen(cast("_C", store)))

    checks = [functools.partial(check, readback=readback) for check in _OWNERSHIP_CHECKS]
    await run_checks("run ownership", make_store, checks)


def _conditional(store: MemoryStore) -> ConditionalStore:
    expect(callable(getattr(store, "apply", None)), "the store has no callable apply")
    return cast("ConditionalStore", store)


async def _seed(store: MemoryStore) -> None:
    await store.set("a", "1", {"m": 1})
    await store.set("b", "2")
    await store.set("c", "3")


async def _apply_writes_everything_when_every_check_holds(store: MemoryStore) -> None:
    await _seed(store)
    first = (await entry_of(store, "a")).created_at
    await asyncio.sleep(TICK)
    metadata: dict[str, object] = {"m": 2}
    applied = await _conditional(store).apply(
        [Expect("a", "1"), Expect("b", "2"), Expect("new", None)],
        [Put("a", "1b", metadata), Put("new", "n"), Remove("c")],
    )
    expect(applied, "apply() must return True when every check holds")
    metadata["m"] = 3
    a = await entry_of(store, "a")
    expect((a.value, a.metadata) == ("1b", {"m": 2}), f"Put wrote {a!r} (metadata must be a copy)")
    expect(a.created_at == first, "a Put over an existing key must keep created_at")
    expect(await value_of(store, "new") == "n", "a Put of a new key did not land")
    expect(await store.get("c") is None, "a Remove did not land")
    expect(await keys_of(store) == ["a", "b", "new"], f"list() after apply: {await keys_of(store)}")


async def _a_mismatch_writes_nothing(store: MemoryStore) -> None:
    await _seed(store)
    before = await store.list()
    await asyncio.sleep(TICK)
    writes: list[Write] = [Put("a", "x", {"m": 9}), Put("new", "n"), Remove("c")]
    apply = _conditional(store).apply
    # The failing check comes last, so a store that writes while it checks is caught.
    for checks in (
        [Expect("a", "1"), Expect("b", "2"), Expect("c", "wrong")],
        [Expect("a", "1"), Expect("missing", "x")],
        [Expect("a", "1"), Expect("b", None)],
    ):
        expect(not await apply(checks, writes), "apply() with a failing check returned True")
        after = await store.list()
        expect(after == before, f"a failed apply() changed the store: {before!r} -> {after!r}")


async def _none_expects_an_absent_key(store: MemoryStore) -> None:
    apply = _conditional(store).apply
    expect(await apply([Expect("k", None)], []), "Expect(k, None) must hold for an absent key")
    expect(not await apply([Expect("k", "")], []), "an absent key must not compare equal to ''")
    await store.set("k", "")
    expect(not await apply([Expect("k", None)], []), "Expect(k, None) held for a present key")
    expect(await apply([Expect("k", "")], []), "Expect(k, '') must hold for the value ''")
    expect(await keys_of(store) == ["k"], "apply() with no writes changed the store")


async def _removes_delete_and_ignore_missing_keys(store: MemoryStore) -> None:
    await _seed(store)
    apply = _conditional(store).apply
    expect(await apply([], [Remove("a"), Remove("missing")]), "unconditional Remove failed")
    expect(await keys_of(store) == ["b", "c"], f"after Remove: {await keys_of(store)}")
    expect(await apply([Expect("b", "2")], [Remove("b"), Put("b", "again")]), "Remove then Put")
    expect(await value_of(store, "b") == "again", "Remove then Put of one key must leave the Put")
    expect(await keys_of(store) == ["c", "b"], "a removed and re-put key must go to the end")


async def _later_writes_to_one_key_win(store: MemoryStore) -> None:
    apply = _conditional(store).apply
    expect(await apply([], [Put("k", "1"), Put("k", "2"), Put("x", "1"), Remove("x")]), "batch")
    expect(await value_of(store, "k") == "2", "the later Put of a key must win")
    expect(await store.get("x") is None, "a Remove after a Put of the same key must win")
    expect(await keys_of(store) == ["k"], f"list() after the batch: {await keys_of(store)}")


async def _several_keys_land_together(store: MemoryStore) -> None:
    # A reader sees either none or all of a batch: no await can split an atomic apply.
    apply = _conditional(store).apply
    batch = [Put(f"k{i}", "v") for i in range(5)]
    seen: list[int] = []

    async def watch() -> None:
        for _ in range(20):
            seen.append(sum(1 for entry in await store.list() if entry.key.startswith("k")))
            await asyncio.sleep(0)

    landed, _ = await asyncio.gather(apply([Expect("k0", None)], batch), watch())
    expect(landed, "an unconditional batch on an empty store must apply")
    expect(set(seen) <= {0, 5}, f"a reader saw a partly applied batch: {sorted(set(seen))}")
    expect(await keys_of(store) == [f"k{i}" for i in range(5)], "new keys keep write order")


async def _concurrent_applies_have_one_winner(store: MemoryStore) -> None:
    apply = _conditional(store).apply
    await store.set("fence", "v0")
    choices = [f"v{i}" for i in range(1, 9)]
    results = await asyncio.gather(
        *(apply([Expect("fence", "v0")], [Put("fence", c), Put("by", c)]) for c in choices)
    )
    winners = [c for c, won in zip(choices, results, strict=True) if won]
    expect(len(winners) == 1, f"{len(winners)} concurrent apply() calls won, expected exactly 1")
    fence, by = await value_of(store, "fence"), await value_of(store, "by")
    expect(fence == by == winners[0], f"writes of different callers mixed: {fence!r}, {by!r}")


_CONDITIONAL_CHECKS = (
    _apply_writes_everything_when_every_check_holds,
    _a_mismatch_writes_nothing,
    _none_expects_an_absent_key,
    _removes_delete_and_ignore_missing_keys,
    _later_writes_to_one_key_win,
    _several_keys_land_together,
    _concurrent_applies_have_one_winner,
)


# --- run ownership -------------------------------------------------------------------------


async def _claim(store: MemoryStore, token: str, previous: str | None) -> bool:
    """Take the run over: the fence moves from ``previous`` (``None``: unowned) to ``token``."""
    return await _conditional(store).apply([Expect(RUN_FENCE, previous)], [Put(RUN_FENCE, token)])


async def _write_as(store: MemoryStore, token: str, snapshot: str) -> bool:
    """The fenced write of an owner holding ``token``: check the fence, write the snapshot."""
    checks = [Expect(RUN_FENCE, token)]
    return await _conditional(store).apply(checks, [Put(RUN_SNAPSHOT, snapshot)])


async def _expect_state(
    store: MemoryStore, readback: Readback, fence: str, snapshot: str, why: str
) -> None:
    for view, where in ((store, "the writer's instance"), (await readback(store), "durably")):
        got = (await value_of(view, RUN_FENCE), await value_of(view, RUN_SNAPSHOT))
        expect(got == (fence, snapshot), f"{why}: {where} holds {got!r}, not {(fence, snapshot)!r}")


async def _superseded_owner_write_never_lands(store: MemoryStore, *, readback: Readback) -> None:
    expect(await _claim(store, "1", None), "owner 1 could not claim a run nobody owned")
    expect(await _write_as(store, "1", "owner-1 rev 1"), "the owner's fenced write failed")
    expect(await _claim(store, "2", "1"), "owner 2 could not take over from token 1")
    expect(await _write_as(store, "2", "owner-2 rev 2"), "the new owner's fenced write failed")
    lost = not await _write_as(store, "1", "owner-1 rev 2")
    expect(lost, "a superseded owner's fenced write returned True: the loser must learn it lost")
    await _expect_state(store, readback, "2", "owner-2 rev 2", "after the stale write")


async def _superseded_owner_cannot_reclaim_or_delete(
    store: MemoryStore, *, readback: Readback
) -> None:
    conditional = _conditional(store)
    expect(await _claim(store, "1", None) and await _claim(store, "2", "1"), "takeover failed")
    expect(await _write_as(store, "2", "owner-2"), "the new owner's fenced write failed")
    expect(not await _claim(store, "3", "1"), "a superseded owner took the run back")
    stale_cleanup = [Remove(RUN_SNAPSHOT), Remove(RUN_FENCE)]
    expect(not await conditional.apply([Expect(RUN_FENCE, "1")], stale_cleanup), "stale Remove")
    expect(not await conditional.compare_and_set(RUN_FENCE, "1", "3"), "stale compare_and_set")
    await _expect_state(store, readback, "2", "owner-2", "after stale reclaim and delete")


async def _stale_writes_racing_a_takeover_never_land_after_it(
    store: MemoryStore, *, readback: Readback
) -> None:
    expect(await _claim(store, "1", None), "owner 1 could not claim a run nobody owned")

    async def take_over() -> bool:
        return await _claim(store, "2", "1") and await _write_as(store, "2", "owner-2")

    stale = [_write_as(store, "1", f"owner-1 write {i}") for i in range(8)]
    *_, took_over = await asyncio.gather(*stale, take_over())
    expect(took_over, "owner 2's takeover and first write failed")
    await _expect_state(store, readback, "2", "owner-2", "after racing stale writes")
    later = await asyncio.gather(*(_write_as(store, "1", f"late {i}") for i in range(4)))
    expect(not any(later), "a stale write after the takeover returned True")
    await _expect_state(store, readback, "2", "owner-2", "after late stale writes")


async def _racing_takeovers_have_one_owner_per_token(
    store: MemoryStore, *, readback: Readback
) -> None:
    current: str | None = None
    for round_ in range(3):
        tokens = [f"{round_}:{i}" for i in range(8)]
        results = await asyncio.gather(
            *(
                _conditional(store).apply(
                    [Expect(RUN_FENCE, current)],
                    [Put(RUN_FENCE, token), Put(RUN_SNAPSHOT, f"taken by {token}")],
                )
                for token in tokens
            )
        )
        winners = [token for token, won in zip(tokens, results, strict=True) if won]
        expect(len(winners) == 1, f"{len(winners)} takeovers from {current!r} won, expected 1")
        current = winners[0]
        losers = [_write_as(store, t, f"loser {t}") for t in tokens if t != current]
        expect(not any(await asyncio.gather(*losers)), "a takeover loser's fenced write landed")
        await _expect_state(store, readback, current, f"taken by {current}", f"round {round_}")


_OWNERSHIP_CHECKS = (
    _superseded_owner_write_never_lands,
    _superseded_owner_cannot_reclaim_or_delete,
    _stale_writes_racing_a_takeover_never_land_after_it,
    _racing_takeovers_have_one_owner_per_token,
)

__all__ = ["RUN_FENCE", "RUN_SNAPSHOT", "check_conditional_store", "check_run_ownership"]
