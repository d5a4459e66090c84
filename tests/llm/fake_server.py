"""A tiny local HTTP server that speaks just enough JSON to stand in for a model provider.

The adapters are tested through the real SDKs over a real socket, so the SDK's request building,
response parsing and error classes are all exercised; only the far end is fake. Each test scripts
the replies (status, JSON body, headers) and afterwards inspects the recorded requests.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType


@dataclass(frozen=True, slots=True)
class ScriptedReply:
    """One reply the server will send."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    reset: bool = False


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    def header(self, name: str) -> str | None:
        """A header value by case-insensitive name."""
        return self.headers.get(name.lower())


class FakeServer:
    """Replies from a queue of scripted replies and records every request.

    Use as a context manager; ``url`` is ``http://127.0.0.1:<port>``. When the queue is empty the
    server answers 418 so a test that under-scripted fails loudly instead of hanging.
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: deque[ScriptedReply] = deque()
        self._lock = threading.Condition()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL of the server."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(
        self,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
        *,
        delay: float = 0.0,
        reset: bool = False,
    ) -> None:
        """Queue one reply; ``body`` is JSON-encoded unless it is ``bytes``.

        ``delay`` holds the reply back that many seconds (to provoke client timeouts); ``reset``
        sends half the body, then resets the connection (a peer lost mid-response).
        """
        with self._lock:
            self._replies.append(ScriptedReply(status, body, dict(headers or {}), delay, reset))

    def reply_many(
        self, count: int, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> None:
        """Queue the same reply ``count`` times."""
        for _ in range(count):
            self.reply(status, body, headers)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> bool:
        """Block until ``count`` requests arrived (call via ``asyncio.to_thread``)."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self.requests) >= count, timeout)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _next_reply(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()
            if self._replies:
                return self._replies.popleft()
        return ScriptedReply(418, {"error": {"type": "test_error", "message": "nothing scripted"}})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0: one request per connection, so no keep-alive socket outlives a test.
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                request = RecordedRequest(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=json.loads(raw) if raw else None,
                )
                reply = server._next_reply(request)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body)
                data = payload if isinstance(payload, bytes) else payload.encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if reply.reset:
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    # Linger 0: closing sends RST instead of FIN, so the client's read fails.
                    linger = struct.pack("ii", 1, 0)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                    self.connection.close()
                    return
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                # Keep pytest output clean; the recorded requests are the log.
                return

        return Handler


class _QuietServer(ThreadingHTTPServer):
    # A client that timed out or was cancelled hangs up before the (delayed) reply is written;
    # that is the point of such tests, not an error worth a traceback on stderr.
    def handle_error(self, request: Any, client_address: Any) -> None:
        return


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then closed again)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
