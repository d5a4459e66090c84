"""A hostile Redis server cannot grow the process: every reply is bounded (issue 24, item 3).

redis-py allocates and reads whatever length a server announces. A store URI can come from a
sidecar client, so a server answering with an endless reply took the sidecar to 1.85 GB. The
store's connections refuse a reply announcing more than ``MAX_REPLY_BYTES`` of bulk data or
``MAX_REPLY_ITEMS`` array elements before reading it: the call fails with a ``StoreError``.
A fake server on a local port plays the hostile one; no real Redis is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import pytest

from oma_actors.errors import StoreError, StoreLimitError
from oma_actors.stores import redis as redis_store
from oma_actors.stores.redis import RedisStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable


async def read_command(reader: asyncio.StreamReader) -> list[bytes]:
    """One RESP command array from a client."""
    header = await reader.readline()
    assert header.startswith(b"*"), header
    parts = []
    for _ in range(int(header[1:])):
        length = int((await reader.readline())[1:])
        parts.append((await reader.readexactly(length + 2))[:-2])
    return parts


@contextlib.asynccontextmanager
async def hostile_server(
    attack: Callable[[asyncio.StreamWriter], object],
) -> AsyncIterator[tuple[str, list[int]]]:
    """A server answering the handshake and PING, then every other command with ``attack``.

    Yields its URL and a list of how many bytes of attack it managed to write.
    """
    sent: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                command = await read_command(reader)
                name = command[0].upper()
                if name == b"PING":
                    writer.write(b"+PONG\r\n")
                elif name in (b"CLIENT", b"SELECT", b"HELLO", b"AUTH"):
                    writer.write(b"+OK\r\n")
                else:
                    result = attack(writer)
                    if asyncio.iscoroutine(result):
                        sent.append(await result)
                await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"redis://127.0.0.1:{port}/0", sent


async def endless(writer: asyncio.StreamWriter, header: bytes, chunk: bytes) -> int:
    """Write ``header`` then ``chunk`` until the client hangs up (or 64 MiB, to end the test)."""
    writer.write(header)
    written = 0
    with contextlib.suppress(ConnectionError):
        while written < 64 << 20:
            writer.write(chunk)
            await writer.drain()
            written += len(chunk)
    return written


@pytest.mark.parametrize(
    ("header", "chunk"),
    [
        (b"$99999999999\r\n", b"x" * 65536),  # one endless bulk string
        (b"*99999999999\r\n", b":1\r\n" * 16384),  # an endless array
    ],
)
async def test_an_endless_reply_fails_as_a_store_error_unread(header: bytes, chunk: bytes) -> None:
    async with hostile_server(lambda writer: endless(writer, header, chunk)) as (url, sent):
        store = RedisStore(url, connect_timeout=5)
        try:
            with pytest.raises(StoreError, match="refused unread"):
                await asyncio.wait_for(store.get("k"), 30)
        finally:
            await store.aclose()
    # The client hung up at the header: far less than the 64 MiB the server would have sent.
    assert sent
    assert sent[0] < 64 << 20


async def test_many_replies_within_the_bulk_limit_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_store, "MAX_REPLY_BYTES", 1000)

    def three_bulks(writer: asyncio.StreamWriter) -> None:
        writer.write(b"*3\r\n" + (b"$600\r\n" + b"y" * 600 + b"\r\n") * 3)

    async with hostile_server(three_bulks) as (url, _):
        store = RedisStore(url, connect_timeout=5)
        try:
            with pytest.raises(StoreError, match="over 1000 bytes"):
                await asyncio.wait_for(store.get("k"), 30)
        finally:
            await store.aclose()


async def test_an_entry_larger_than_a_readable_reply_is_refused_before_it_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redis_store, "MAX_REPLY_BYTES", 1000)
    scripts: list[int] = []

    def count(writer: asyncio.StreamWriter) -> None:
        scripts.append(1)  # a script reached the server
        writer.write(b"$-1\r\n")

    async with hostile_server(count) as (url, _):
        store = RedisStore(url, connect_timeout=5)
        try:
            with pytest.raises(StoreLimitError) as caught:
                await store.set("k", "v" * 2000)
            assert caught.value.limit == 1000 < caught.value.size
            assert scripts == []
            assert await store.get("k") is None  # a small call still reaches the server
            assert scripts == [1]
        finally:
            await store.aclose()
