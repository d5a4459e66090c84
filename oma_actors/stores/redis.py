"""RedisStore: a store in five Redis keys under one prefix, atomic through server-side scripts.

An entry lives in three hashes (value, metadata with expiry, created_at) and a sorted set that
orders keys by a score taken from a counter, all named ``<prefix>...``. Every read and write is
one Lua script, and Redis runs a script with nothing else interleaved: a compare-and-set or an
``apply`` checks and writes as one step for every client of the server, and ``list()`` reads
the order and the entries as one consistent snapshot. Durability is the server's: configure
AOF (``appendonly yes``) where losing the last second of writes matters.

redis-py is imported on first use, so the base install does not need the ``redis`` extra.

A reply is bounded (``MAX_REPLY_BYTES`` of bulk data, ``MAX_REPLY_ITEMS`` array elements):
redis-py allocates whatever length a server announces and reads on, so a hostile server named
by a store URI answering with an endless reply grew the process to gigabytes (issue 24,
item 3). redis-py has no option for this; the store's connections use a parser that refuses
such a reply before reading it, which the store reports as a ``StoreError``. A write of an
entry larger than that limit is refused before it is sent (``StoreLimitError``), so every
entry written can be read back with ``get``; ``list`` reads the whole store in one reply, so a
store holding more than the limit in total lists with an error (not bounded at write time).
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, cast

from oma_actors.clock import SYSTEM_CLOCK
from oma_actors.errors import ConfigurationError, CorruptStoreError, StoreError, StoreLimitError
from oma_actors.stores.base import Expect, MemoryEntry, Put, Remove
from oma_actors.stores.conditional import AppliesConditionally
from oma_actors.stores.database import DatabaseStore
from oma_actors.stores.rows import decode_time, encode_batch, encode_metadata, encode_time, redact

if TYPE_CHECKING:
    import builtins
    from collections.abc import Mapping, Sequence
    from types import ModuleType

    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

    from oma_actors.clock import Clock
    from oma_actors.stores.base import Write

# KEYS: values, meta, created, order, seq. ARGV: now, n, n x (key, present?, value), then
# writes as (op, key, value, meta). A Put of a new key takes created_at and a place at the end;
# an overwrite keeps both. A Remove forgets both, so a re-put key goes to the end. Redis does
# not undo a script that fails half-way, so every way a write could fail (a key of the wrong
# type, a counter that is not a number) is checked before the first write.
_APPLY = """
local kinds = {'hash', 'hash', 'hash', 'zset', 'string'}
for k = 1, 5 do
  local kind = redis.call('TYPE', KEYS[k])['ok']
  if kind ~= 'none' and kind ~= kinds[k] then
    return redis.error_reply('corrupt store: ' .. KEYS[k] .. ' holds a ' .. kind)
  end
end
local seq = redis.call('GET', KEYS[5])
if seq and not tonumber(seq) then
  return redis.error_reply('corrupt store: ' .. KEYS[5] .. ' is not a number')
end
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local current = redis.call('HGET', KEYS[1], ARGV[i])
  if ARGV[i + 1] == '0' then
    if current then return 0 end
  elseif current ~= ARGV[i + 2] then
    return 0
  end
  i = i + 3
end
while i <= #ARGV do
  local key = ARGV[i + 1]
  if ARGV[i] == 'put' then
    if redis.call('HSETNX', KEYS[3], key, ARGV[1]) == 1 then
      redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), key)
    end
    redis.call('HSET', KEYS[1], key, ARGV[i + 2])
    redis.call('HSET', KEYS[2], key, ARGV[i + 3])
  else
    redis.call('HDEL', KEYS[1], key)
    redis.call('HDEL', KEYS[2], key)
    redis.call('HDEL', KEYS[3], key)
    redis.call('ZREM', KEYS[4], key)
  end
  i = i + 4
end
return 1
"""
_GET = """
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return false end
return {value, redis.call('HGET', KEYS[2], ARGV[1]), redis.call('HGET', KEYS[3], ARGV[1])}
"""
# ARGV[1]: the prefix ("" lists all). Compared as bytes in the script, never as a SCAN/HSCAN
# glob: the prefix's own * ? [ match only themselves, and the listing stays one snapshot.
_LIST = """
local prefix = ARGV[1] or ''
local out = {}
for _, key in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  if string.sub(key, 1, #prefix) == prefix then
    table.insert(out, {key, redis.call('HGET', KEYS[1], key), redis.call('HGET', KEYS[2], key),
      redis.call('HGET', KEYS[3], key)})
  end
end
return out
"""


MAX_REPLY_BYTES = 256 << 20
"""The most bulk data one reply may carry (the file store's read limit, 256 MiB)."""
MAX_REPLY_ITEMS = 1 << 20
"""The most elements one reply's arrays may announce, all nesting levels together."""


@functools.cache
def _bounded_parser() -> type[Any]:
    """redis-py's RESP2 parser refusing a reply over ``MAX_REPLY_BYTES`` or ``MAX_REPLY_ITEMS``."""
    from redis._parsers.resp2 import _AsyncRESP2Parser  # no public hook bounds a reply
    from redis.exceptions import InvalidResponse

    class BoundedParser(_AsyncRESP2Parser):
        _bulk_bytes = 0
        _items = 0

        async def read_response(self, disable_decoding: bool = False) -> Any:
            self._bulk_bytes = self._items = 0
            return await super().read_response(disable_decoding=disable_decoding)

        async def _readline(self) -> bytes:
            line: bytes = await super()._readline()
            # Every header is checked before what it announces is read or allocated.
            if line[:1] == b"$" and line[1:].isdigit():
                self._bulk_bytes += int(line[1:])
                if self._bulk_bytes > MAX_REPLY_BYTES:
                    raise InvalidResponse(
                        f"the server's reply is over {MAX_REPLY_BYTES} bytes; refused unread"
                    )
            elif line[:1] == b"*" and line[1:].isdigit():
                self._items += int(line[1:])
                if self._items > MAX_REPLY_ITEMS:
                    raise InvalidResponse(
                        f"the server's reply has over {MAX_REPLY_ITEMS} items; refused unread"
                    )
            return line

    return BoundedParser


def _maintenance_off() -> Any:
    from redis.maint_notifications import MaintNotificationsConfig

    return MaintNotificationsConfig(enabled=False)


def _redis() -> ModuleType:
    try:
        import redis.asyncio  # the optional dependency is loaded only when used
    except ImportError as exc:
        raise ConfigurationError(
            "RedisStore needs redis-py: install the extra with pip install 'oma-actors[redis]'"
        ) from exc
    return redis


class RedisStore(DatabaseStore["Redis"], AppliesConditionally):
    """A store in one Redis database under a key prefix, on redis-py's asyncio client.

    ``compare_and_set`` and ``apply`` are atomic for every client of the server. It satisfies
    ``ConditionalStore`` (so ``AtomicStore``) and ``ExpiringStore``; ``list()`` keeps insertion
    order and an overwrite keeps its position and ``created_at``. Use ``async with
    RedisStore(url) as store``: it connects eagerly and closes the connections on exit. A store
    used without ``async with`` connects on first use; then call ``aclose()``.

    Args:
        url: A ``redis://[:password@]host:port/db`` (or ``rediss://``) URL.
        prefix: Starts the name of each of the store's five Redis keys; stores with different
            prefixes are independent. Put a ``{tag}`` in it to keep the keys on one cluster slot.
        clock: Stamps ``created_at`` of new keys.
        connect_timeout: Seconds to wait for the server before failing.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "oma:",
        clock: Clock = SYSTEM_CLOCK,
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(f"{redact(url)} (prefix {prefix!r})")
        self._url = url
        self._prefix = prefix
        self._clock = clock
        self._connect_timeout = connect_timeout
        self._keys = [f"{prefix}{part}" for part in ("values", "meta", "created", "order", "seq")]
        self._scripts: dict[str, AsyncScript] = {}

    @property
    def prefix(self) -> str:
        """The prefix of the store's Redis keys."""
        return self._prefix

    @property
    def keys(self) -> tuple[str, ...]:
        """The Redis keys holding this store's entries (all start with the prefix)."""
        return tuple(self._keys)

    async def get(self, key: str) -> MemoryEntry | None:
        """Return the entry at ``key``, or ``None`` when there is none."""
        row = await self._script(_GET, [key])
        return None if row is None else self._entry([key, *row])

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        """Apply ``writes`` in order, in one server-side script, only if every check holds.

        Returns:
            ``True`` if every check held and the writes happened, ``False`` on a mismatch
            (nothing written).

        Raises:
            StoreError: A ``Put``'s metadata is not JSON-serializable (nothing written), or the
                server failed (then the outcome is unknown only if the reply was lost).
        """
        ops = [
            ("put", w.key, w.value, _meta(m, None))
            if isinstance(w, Put)
            else ("del", w.key, "", "")
            for w, m in encode_batch(writes)
        ]
        return await self._write(checks, ops)

    async def list(self, prefix: str | None = None) -> builtins.list[MemoryEntry]:
        """Return every entry in insertion order; with ``prefix``, only keys that start with it.

        The server filters the insertion order by the prefix's bytes, so only matching entries
        cross the wire (and count toward ``MAX_REPLY_BYTES``); it still walks every key.
        """
        rows = await self._script(_LIST, [prefix or ""])
        return [self._entry(row) for row in rows]

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is a no-op."""
        await self.apply((), (Remove(key),))

    async def clear(self) -> None:
        """Remove every entry (the five keys of this prefix)."""
        client = await self._connected()
        await self._call(client.delete(*self._keys))

    async def _upsert(
        self, key: str, value: str, metadata: Mapping[str, Any] | None, expires: int | None
    ) -> None:
        meta = _meta(encode_metadata(metadata, key), expires)
        await self._write([], [("put", key, value, meta)])

    async def _write(
        self, checks: Sequence[Expect], ops: builtins.list[tuple[str, str, str, str]]
    ) -> bool:
        for _, key, value, meta in ops:
            # An entry whose reply the store would refuse to read could never be read back.
            size = sum(len(text.encode("utf-8", "surrogatepass")) for text in (key, value, meta))
            if size > MAX_REPLY_BYTES:
                raise StoreLimitError(self._name, size, MAX_REPLY_BYTES)
        args: builtins.list[str] = [encode_time(self._clock.now()), str(len(checks))]
        for check in checks:
            present = check.value is not None
            args += [check.key, "1" if present else "0", check.value or ""]
        for op in ops:
            args += op
        return bool(await self._script(_APPLY, args))

    async def _script(self, source: str, args: builtins.list[str]) -> Any:
        client = await self._connected()
        script = self._scripts.get(source)
        if script is None:
            # EVALSHA with a fallback to EVAL: the script's text crosses the wire once.
            script = self._scripts[source] = client.register_script(source)
        return await self._call(script(keys=self._keys, args=args))

    def _entry(self, row: Sequence[Any]) -> MemoryEntry:
        key, value, meta, created = row
        if not isinstance(meta, str) or not isinstance(created, str):
            raise CorruptStoreError(self._name, f"entry {key!r} is missing its metadata or time")
        try:
            metadata, expires = json.loads(meta)
        except (ValueError, TypeError) as exc:
            raise CorruptStoreError(self._name, f"unreadable metadata of entry {key!r}") from exc
        if not isinstance(value, str) or not isinstance(metadata, dict | None):
            raise CorruptStoreError(self._name, f"malformed value or metadata of entry {key!r}")
        return MemoryEntry(
            key=key,
            value=value,
            metadata=metadata,
            created_at=decode_time(self._name, key, created),
            expires_at_turn=expires if type(expires) is int else None,
        )

    def _failures(self) -> tuple[type[Exception], ...]:
        return (_redis().RedisError, OSError, ValueError)

    async def _disconnect(self, handle: Redis) -> None:
        await handle.aclose()

    async def _connect(self) -> Redis:
        """Connect and check the server answers (a ``PING``)."""
        driver = _redis()
        try:
            client = cast(
                "Redis",
                driver.asyncio.Redis.from_url(
                    self._url,
                    decode_responses=True,
                    socket_connect_timeout=self._connect_timeout,
                    parser_class=_bounded_parser(),
                    protocol=2,  # the bounded parser speaks RESP2, as every Redis does
                    # RESP3-only push notifications would refuse the bounded RESP2 parser.
                    maint_notifications_config=_maintenance_off(),
                ),
            )
        except ValueError as exc:
            raise ConfigurationError(f"{self._name}: {exc}") from exc
        try:
            await client.ping()
        except BaseException as exc:
            await client.aclose()
            if isinstance(exc, driver.RedisError | OSError):
                raise StoreError(f"{self._name}: cannot connect ({exc})") from exc
            raise
        return client


def _meta(metadata: str | None, expires_at_turn: int | None) -> str:
    """The meta hash's field: ``[metadata, expires_at_turn]`` as JSON text."""
    turn = "null" if expires_at_turn is None else str(int(expires_at_turn))
    return f"[{metadata or 'null'},{turn}]"


__all__ = ["RedisStore"]
