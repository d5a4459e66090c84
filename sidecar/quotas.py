"""Quotas on what a client may make the sidecar hold: request bytes, runs and watches.

The size quota: one request may carry at most so many bytes. Everything a client sends can end
up stored: a ``StartRun``'s spec in the run record and the checkpoint, a host tool's result and
an approval's edited arguments in the checkpoint and the journal. A file store holds all runs in
one file that it refuses to read past its limit, so unbounded input once made a sidecar
unbootable (issue 24, item 1). Every ``oma.v1`` request is checked as it is decoded
(``sidecar.decoding``), before any handler stores anything; a request over the quota ends with
RESOURCE_EXHAUSTED, reason ``INPUT_TOO_LARGE``, naming its largest field so the client knows
what to shorten.

The tenant quotas (``--max-active-runs-per-tenant``, ``--max-watches-per-tenant``): what one
tenant holds is bounded, so that it cannot take the store or the process from the others
(without principals, the one tenant ``""``). :class:`RunQuota` bounds the runs a tenant holds
that have not finished (queued, running, suspended, interrupted): ``StartRun`` and ``ForkRun``
over it end with RESOURCE_EXHAUSTED / ``TOO_MANY_RUNS``. :class:`WatchQuota` bounds the
``WatchRun`` streams a tenant has open: one more ends with RESOURCE_EXHAUSTED /
``TOO_MANY_WATCHERS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.status import SidecarError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    from google.protobuf.descriptor import FieldDescriptor
    from google.protobuf.message import Message

    from sidecar.execution import RunExecutor
    from sidecar.runs import RunRegistry


class InputTooLargeError(SidecarError):
    """A request is larger than the server's input quota.

    ``request`` is the refused message, decoded (``None`` if unknown): a handler may need to
    know what it refused, e.g. which host tool call an oversized result was for.
    """

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(
        self, field: str, size: int, limit: int, *, request: Message | None = None
    ) -> None:
        super().__init__(
            "INPUT_TOO_LARGE",
            f"the request is {size} bytes, over this server's {limit}-byte input quota "
            f"(--max-input-bytes); its largest field is {field}",
            metadata={"field": field, "size": str(size), "limit": str(limit)},
        )
        self.field = field
        self.size = size
        self.limit = limit
        self.request = request


def check_input_size(message: Message, size: int, limit: int) -> None:
    """Refuse ``message`` (``size`` bytes on the wire) if it is over ``limit`` bytes.

    Raises:
        InputTooLargeError: naming the request's largest field.
    """
    if size > limit:
        raise InputTooLargeError(largest_field(message) or "request", size, limit, request=message)


def largest_field(message: Message) -> str:
    """The path of the largest part of ``message``, for a client to know what to shorten.

    Fields are named as declared, joined by dots; an item of a repeated field by its index
    (``tasks.tasks[3].description``) and an entry of a map by its key, JSON-quoted and cut to
    ``KEY_CHARS`` characters (``metadata.fields["note"].string_value``: a ``Struct``'s member,
    whose ``Value`` may nest further ``Struct``s and ``ListValue``s). At each level the field
    with the most bytes (all its items or entries together) is chosen; the path goes on into
    its largest item or entry only while that one holds at least half of them, so a field
    made large by many small items (a ``depends_on`` of thousands of ids) is named itself.
    """
    path: list[str] = []
    current: Message | None = message
    while current is not None:
        best_size, best_name, best_child = -1, "", None
        for descriptor, value in current.ListFields():
            parts = list(_parts(descriptor, value))
            size = sum(part[1] for part in parts)
            if size <= best_size:
                continue
            name, largest, child = max(parts, key=lambda part: part[1])
            if descriptor.is_repeated and 2 * largest < size:  # many items make it large
                name, child = descriptor.name, None
            best_size, best_name, best_child = size, name, child
        if not best_name:
            break
        path.append(best_name)
        current = best_child
    return ".".join(path)


KEY_CHARS = 40
"""A map key longer than this is cut in a field path (the path travels in the error)."""


def _parts(descriptor: FieldDescriptor, value: Any) -> Iterator[tuple[str, int, Message | None]]:
    """The parts of a set field: each one's name in a path, its size in bytes and the message
    the path may go on into (``None``: a leaf)."""
    entry = descriptor.message_type
    if entry is not None and entry.GetOptions().map_entry:  # a map: entries by key
        key_field, value_field = entry.fields_by_name["key"], entry.fields_by_name["value"]
        for key, item in value.items():
            key_size, item_size = _size(key_field, key), _size(value_field, item)
            # A huge key is what to shorten, not the value it maps to.
            message_valued = value_field.message_type is not None
            child = item if message_valued and item_size >= key_size else None
            yield f"{descriptor.name}[{_key(key)}]", key_size + item_size, child
        return
    if not descriptor.is_repeated:
        yield descriptor.name, _size(descriptor, value), value if entry is not None else None
        return
    for index, item in enumerate(value):
        child = item if entry is not None else None
        yield f"{descriptor.name}[{index}]", _size(descriptor, item), child


def _key(key: object) -> str:
    """A map key in a path: a string JSON-quoted (ASCII, cut to ``KEY_CHARS``), else as is."""
    if isinstance(key, str):
        return json.dumps(key[:KEY_CHARS]) + ("..." if len(key) > KEY_CHARS else "")
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _size(descriptor: FieldDescriptor, value: object) -> int:
    if descriptor.message_type is not None:
        return int(value.ByteSize())  # type: ignore[attr-defined]
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes):
        return len(value)
    return 8  # a number or a bool: never what makes a request too large


# -- the tenant quotas -----------------------------------------------------------------------

ENDED = frozenset({pb.RUN_STATUS_COMPLETED, pb.RUN_STATUS_FAILED, pb.RUN_STATUS_CANCELLED})
"""The statuses of a run its tenant no longer holds against ``--max-active-runs-per-tenant``
(retention deletes such runs; any other status, an unknown one included, is held)."""
REFRESH_S = 5.0
"""How long a count of a tenant's runs is used while under the limit (see ``RunQuota``)."""
RECOUNT_S = 0.1
"""How long a tenant at its limit is refused on a count before its runs are counted again."""
COUNT_SHARE = 0.05
"""The most of the time counting one tenant's runs may take: the next count waits at least
the last one's duration / ``COUNT_SHARE`` (a count reads every run of the store)."""


class TooManyRunsError(SidecarError):
    """The caller's tenant holds as many unfinished runs as the server allows."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, held: int, limit: int) -> None:
        super().__init__(
            "TOO_MANY_RUNS",
            f"this tenant holds {held} runs that have not finished (queued, running, "
            f"suspended or interrupted), and this server allows {limit} "
            "(--max-active-runs-per-tenant): finish, cancel or delete one first",
            metadata={"held": str(held), "limit": str(limit)},
        )
        self.held = held
        self.limit = limit


class TooManyWatchersError(SidecarError):
    """The caller's tenant has as many ``WatchRun`` streams open as the server allows."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, limit: int) -> None:
        super().__init__(
            "TOO_MANY_WATCHERS",
            f"this tenant has {limit} WatchRun streams open, as many as this server allows "
            "(--max-watches-per-tenant): end one first",
            metadata={"limit": str(limit)},
        )
        self.limit = limit


async def held_runs(
    registry: RunRegistry, executor: RunExecutor, tenant: str, under: int
) -> tuple[int, bool]:
    """How many runs of ``tenant`` have not finished, counted as ``ListRuns`` lists them, and
    whether that is exact: when the tenant has fewer than ``under`` runs in all, finished or
    not, that number (an upper bound, ``False``), without reading what each run is.

    The registry keeps no count by tenant or by status (what a run is belongs to its run
    record, D16). This lists the registry's records (one listing of the state store's prefix;
    a record already decoded is not decoded again: about 2 ms for 1,000 runs, memory store),
    and for an exact count every run record of the store, parsed (as ``ListRuns``: about 45 ms
    more for 1,000 runs). A record that cannot be read names no tenant and is not counted.
    """
    found, _ = await registry.scan()
    mine = [record for record in found if record.tenant == tenant]
    if len(mine) < under:
        return len(mine), False
    views = await executor.viewed_all(mine)
    return sum(1 for view in views if view.status not in ENDED), True


@dataclass(slots=True, eq=False)
class _Tenant:
    """What ``RunQuota`` knows of one tenant's runs."""

    counted: int = 0
    """Its unfinished runs at the last count (or an upper bound of them, see ``exact``)."""
    exact: bool = False
    """``counted`` is exact and ``since`` 0: nothing admitted since an exact count."""
    since: int = 0
    """Admissions that count may not include: those under way as it began, and every one since
    (the estimate is ``counted + since``, never below the truth in this process)."""
    counted_at: float = -math.inf
    """When the last count ended (the loop's clock)."""
    pause: float = 0.0
    """How long after a count the next one waits at least (``RECOUNT_S``, ``COUNT_SHARE``)."""
    pending: int = 0
    """Admitted operations that have not returned yet."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while the tenant's runs are counted: one count at a time."""
    drained: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while no admitted operation is under way."""

    def __post_init__(self) -> None:
        self.drained.set()


class Admission:
    """The place one admitted ``StartRun`` or ``ForkRun`` holds while it runs."""

    def __init__(self, tenant: _Tenant) -> None:
        self._tenant = tenant
        self._counted = True

    def unused(self) -> None:
        """The operation made no run (a retry answered with the run it started before)."""
        if self._counted:
            self._counted = False
            self._tenant.since = max(0, self._tenant.since - 1)


class RunQuota:
    """At most ``limit`` unfinished runs per tenant (``--max-active-runs-per-tenant``).

    Counting a tenant's runs reads every run of the state store (:func:`held_runs`, the cost of
    a ``ListRuns``: about 50 ms for 1,000 runs), so it is not done per ``StartRun``. Each
    tenant's count is kept with the admissions made since; a new run is admitted at once while
    that estimate is under the limit and the count younger than ``REFRESH_S``. In one process
    the estimate never errs low: a run becomes unfinished only by ``StartRun`` or ``ForkRun``
    (``RestoreRun`` takes interrupted and suspended runs, held already), while finishing and
    deleting only lower the truth. When the estimate reaches the limit the runs are counted
    again, once the admitted operations under way have returned (each may be counted twice
    until then): a refusal rests on an exact count, taken at most ``RECOUNT_S`` before (or
    1 / ``COUNT_SHARE`` times that count's duration, when longer). Counts of a tenant are taken
    one at a time and at most ``COUNT_SHARE`` of the time: a tenant sending ``StartRun`` at its
    limit costs the others little.

    Sidecars sharing a store see the runs the others started at their own counts only (every
    ``REFRESH_S`` while the tenant starts runs): between two counts, each may admit up to the
    limit.

    Args:
        limit: the most unfinished runs one tenant may hold (at least 1).
        count: counts a tenant's unfinished runs (:func:`held_runs` without its first two
            arguments).
    """

    def __init__(
        self, limit: int, count: Callable[[str, int], Awaitable[tuple[int, bool]]]
    ) -> None:
        self.limit = limit
        self._count = count
        self._tenants: dict[str, _Tenant] = {}

    @contextlib.asynccontextmanager
    async def admitting(self, tenant: str) -> AsyncIterator[Admission]:
        """Admit one operation that may make a run of ``tenant``, held until it returns.

        Raises:
            TooManyRunsError: ``tenant`` holds ``limit`` unfinished runs.
        """
        state = self._tenants.setdefault(tenant, _Tenant())
        if not self._room(state):
            await self._check(tenant, state)
        # No await from the check to here: no other admission comes between.
        state.since += 1
        state.exact = False
        state.pending += 1
        state.drained.clear()
        try:
            yield Admission(state)
        finally:
            state.pending -= 1
            if not state.pending:
                state.drained.set()

    def estimate(self, tenant: str) -> int:
        """The unfinished runs of ``tenant`` as this quota reckons them (at least the truth in
        this process)."""
        state = self._tenants.get(tenant)
        return 0 if state is None else state.counted + state.since

    def _age(self, state: _Tenant) -> float:
        return asyncio.get_running_loop().time() - state.counted_at

    def _room(self, state: _Tenant) -> bool:
        return self._age(state) < max(REFRESH_S, state.pause) and not self._full(state)

    async def _check(self, tenant: str, state: _Tenant) -> None:
        """Count ``tenant``'s runs until there is room, or refuse on an exact count."""
        async with state.lock:
            if self._room(state):
                return  # counted while this one waited for the lock
            if self._full(state) and state.exact and self._age(state) < state.pause:
                raise TooManyRunsError(state.counted, self.limit)  # counted just now
            while True:
                if self._full(state):
                    # Maybe counted twice: those under way, in the count and in ``since``.
                    while state.pending:
                        await state.drained.wait()
                await self._recount(tenant, state)
                if not self._full(state):
                    return
                if state.exact:
                    raise TooManyRunsError(state.counted, self.limit)

    def _full(self, state: _Tenant) -> bool:
        return state.counted + state.since >= self.limit

    async def _recount(self, tenant: str, state: _Tenant) -> None:
        loop = asyncio.get_running_loop()
        carried, admitted, began = state.pending, state.since, loop.time()
        counted, exact = await self._count(tenant, self.limit - carried)
        # Admissions under way as the count began, or made while it ran, may be missing from
        # it; an exact count has none (none are made while the estimate is at the limit).
        state.counted, state.since = counted, carried + state.since - admitted
        state.exact = exact and not state.since
        state.counted_at = loop.time()
        state.pause = max(RECOUNT_S, (state.counted_at - began) / COUNT_SHARE)


class WatchQuota:
    """At most ``limit`` open ``WatchRun`` streams per tenant (``--max-watches-per-tenant``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def open(self, tenant: str) -> WatchSlot:
        """A place for one more stream of ``tenant``, held until released.

        Raises:
            TooManyWatchersError: ``tenant`` has ``limit`` streams open.
        """
        held = self._open.get(tenant, 0)
        if held >= self.limit:
            raise TooManyWatchersError(self.limit)
        self._open[tenant] = held + 1
        return WatchSlot(self, tenant)

    def count(self, tenant: str) -> int:
        """The streams ``tenant`` has open."""
        return self._open.get(tenant, 0)

    def _release(self, tenant: str) -> None:
        held = self._open.get(tenant, 0) - 1
        if held > 0:
            self._open[tenant] = held
        else:
            self._open.pop(tenant, None)


class WatchSlot:
    """One open stream's place in its tenant's ``WatchQuota``."""

    def __init__(self, quota: WatchQuota, tenant: str) -> None:
        self._quota = quota
        self._tenant = tenant
        self._held = True

    def release(self, *_: object) -> None:
        """Give the place back (once: later calls do nothing); takes and ignores arguments, so
        it can be a done callback."""
        if self._held:
            self._held = False
            self._quota._release(self._tenant)
