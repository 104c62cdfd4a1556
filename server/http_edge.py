"""The HTTP edge of claimcheck's servers, shared by the status API and the MCP transports (`/mcp`, `/sse`).

- A connection gets `REQUEST_DEADLINE_SECS` to send a complete request (headers and body), counted from
  when it opens or its previous response ended; then it is closed, so idle and slow clients cannot pile up.
- More than one `Authorization` or `Origin` header is answered 400, never resolved by guessing which counts.
- A request body over the limit is answered 413 from its Content-Length, or as soon as the streamed body
  passes the limit; a client that leaves in the middle of its request is a DEBUG line, not an ERROR.
- What a loopback server answers (`loopback_host`): a `Host` that names 127.0.0.1, localhost or [::1], with a port
  or without one; one rule for the status API and the MCP routes, against DNS rebinding.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, Literal

import anyio
import h11
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.budget import HEAD_BYTES, request_id
from server.http_compat import H11Protocol

__all__ = [
    "LOOPBACK_HOSTS",
    "REQUEST_DEADLINE_SECS",
    "BodyLimit",
    "SingleHeaders",
    "edge_server",
    "loopback_host",
    "reply",
    "serve_until_cancelled",
]

logger = logging.getLogger(__name__)

REQUEST_DEADLINE_SECS = 10.0
KEEP_ALIVE_SECS = 9
"""How long an idle connection is kept for the client's next request: longer than the 5 s after which the SDK's
own client (httpx2) and Node's stop reusing one, so a request is never sent on a connection the server is closing
at that moment (the client would read a reset: `ReadError`); under the request deadline, which closes idle
connections too (where it is shorter, that closes them first)."""
_SINGLE = (b"authorization", b"origin")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""The names a loopback server answers to in a `Host` header (and an `Origin`), each with or without a port."""


def loopback_host(address: str) -> bool:
    """Whether `address` (`host` or `host:port`, as a `Host` header gives it) names a loopback host.

    A client or proxy that leaves out the port is no rebinding page, whose Host is always its own site's name."""
    return any(address == name or address.startswith(f"{name}:") for name in LOOPBACK_HOSTS)


_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class _DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request is not complete by its deadline."""

    request_deadline = REQUEST_DEADLINE_SECS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._request_complete():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self._request_complete():
            self._arm()  # the next request's time starts now (a pending one keeps its own)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _request_complete(self) -> bool:
        return self.conn.their_state not in (h11.IDLE, h11.SEND_BODY)

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.request_deadline, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self._request_complete():
            return
        logger.debug(
            "closing a connection from %s: no complete request within %g s", self.client, self.request_deadline
        )
        if self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE and self.conn.trailing_data[0]:
            self.transport.write(_TIMED_OUT)  # part of a request line or headers came: say why
        self.transport.close()  # an app waiting for the rest of a body sees the client leave


def _protocol(deadline: float) -> type[asyncio.Protocol]:
    return type("DeadlineProtocol", (_DeadlineProtocol,), {"request_deadline": deadline})


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers, for a server that runs beside the process's own transport."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _SignalledServer(uvicorn.Server):
    """uvicorn stopping on SIGINT/SIGTERM itself, which keeps the signals it caught (`caught`) instead of raising
    them again as it returns: the caller raises them once what runs around the server has stopped (the proxy's
    shutdown removes its discovery file and stops its servers; a signal raised before that ended the process)."""

    caught: list[int]

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        self.caught = []
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self._caught) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def _caught(self, sig: int, frame: FrameType | None) -> None:
        self.caught.append(sig)
        self.handle_exit(sig, frame)  # uvicorn's public handler: stop (a second SIGINT: at once)


def raise_caught(server: uvicorn.Server) -> None:
    """Raise again the signals `server` stopped on (the last first), as uvicorn would have as it returned."""
    for sig in reversed(getattr(server, "caught", [])):
        signal.raise_signal(sig)


def edge_server(
    app: ASGIApp,
    *,
    lifespan: Literal["on", "off"] = "off",
    request_deadline: float = REQUEST_DEADLINE_SECS,
    graceful_secs: int = 2,
    own_signals: bool = False,
) -> uvicorn.Server:
    """A uvicorn server for `app` with the edge rules; `own_signals` lets it stop on SIGINT/SIGTERM itself."""
    config = uvicorn.Config(
        SingleHeaders(app),
        http=_protocol(request_deadline),
        lifespan=lifespan,
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # nothing sits in front of claimcheck: X-Forwarded-* are a client's claims
        server_header=False,
        timeout_graceful_shutdown=graceful_secs,
        timeout_keep_alive=KEEP_ALIVE_SECS,  # a shorter request deadline closes idle connections first
    )
    return _SignalledServer(config) if own_signals else _QuietServer(config)


async def serve_until_cancelled(server: uvicorn.Server, sock: socket.socket) -> None:
    """Serve on `sock` until the server stops by itself or this is cancelled, then stop it gracefully."""
    stopped = anyio.Event()

    async def serve() -> None:
        # Shielded: cancelling uvicorn mid-flight leaves its listening socket registered with the event loop,
        # and a later socket that reuses the descriptor would be served by the dead server.
        with anyio.CancelScope(shield=True):
            try:
                await server.serve(sockets=[sock])
            finally:
                stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            await stopped.wait()
        finally:
            server.should_exit = True  # uvicorn notices within 0.1 s; open requests get the graceful time


async def reply(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A whole JSON response."""
    data = json.dumps(body).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": data})


class SingleHeaders:
    """400 for a request with more than one `Authorization` or `Origin` header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            names = [name for name, _ in scope["headers"] if name in _SINGLE]
            for name in set(names):
                if names.count(name) > 1:
                    header = name.decode().title()
                    await reply(send, 400, {"error": f"more than one {header} header; send exactly one"})
                    return
        await self.app(scope, receive, send)


class _TooLarge(Exception):
    """The streamed body passed the limit (raised from `receive`, caught by `BodyLimit`)."""


class _ClientLeft(Exception):
    """The client went away before its body was complete."""


class BodyLimit:
    """413 for a request body over `max_bytes`: from Content-Length at once, else counted as it streams.

    Nothing is buffered here; the app reads the body as before. Place it inside Starlette's error middleware
    (as `Middleware(BodyLimit, ...)`), so the exceptions it raises through `receive` come back to it.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, setting: str = "settings.maxRequestBytes") -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.setting = setting

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if b"content-length" not in headers and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body (a GET stream, say): nothing to count
            return
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            why = f"{int(declared)} bytes, over the {self.max_bytes}-byte limit ({self.setting})"
            await self._refuse(send, why, await _head(receive))
            return
        received = 0
        head = b""
        complete = False
        responded = False

        async def counted() -> Message:
            nonlocal received, complete, head
            message = await receive()
            if complete:
                return message
            if message["type"] == "http.disconnect":
                raise _ClientLeft
            body = message.get("body", b"")
            if len(head) < HEAD_BYTES:
                head += body[: HEAD_BYTES - len(head)]
            received += len(body)
            if received > self.max_bytes:
                raise _TooLarge
            complete = not message.get("more_body", False)
            return message

        async def watched(message: Message) -> None:
            nonlocal responded
            responded = responded or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not responded:
                await self._refuse(
                    send, f"over the {self.max_bytes}-byte limit ({self.setting}); the rest was not read", head
                )
        except _ClientLeft:
            logger.debug("%s %s: the client left before its request body was complete", scope["method"], scope["path"])

    async def _refuse(self, send: Send, why: str, head: bytes) -> None:
        """413, with the request's id where the first bytes of its body show it."""
        message = f"Request too large: {why}."
        error = {"jsonrpc": "2.0", "id": request_id(head), "error": {"code": -32600, "message": message}}
        await reply(send, 413, error)


async def _head(receive: Receive) -> bytes:
    """The first bytes of a request body, for its id (the rest is not read)."""
    head = b""
    while len(head) < HEAD_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            break
        head += message.get("body", b"")
        if not message.get("more_body", False):
            break
    return head[:HEAD_BYTES]
