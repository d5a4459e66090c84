"""A TCP proxy that can be cut: every connection through it dropped, new ones refused.

Put between a sidecar and PostgreSQL, it makes a store outage without touching the database.
"""

from __future__ import annotations

import asyncio
import contextlib


class CuttableProxy:
    """Forwards ``127.0.0.1:<port>`` to ``host:port`` until :meth:`cut`, again after
    :meth:`mend`."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._up = True
        self._open: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.cut()
        await self._server.wait_closed()

    def cut(self) -> None:
        """Drop every connection (as a dead network does) and refuse new ones."""
        self._up = False
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    def mend(self) -> None:
        """Accept and forward connections again."""
        self._up = True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._up:
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._open |= {writer, upstream}
        try:
            await asyncio.gather(self._pipe(reader, upstream), self._pipe(upstream_reader, writer))
        finally:
            for end in (writer, upstream):
                self._open.discard(end)
                end.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
