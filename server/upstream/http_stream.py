"""The response of a fast-path call over streamable HTTP (`server.upstream.http_fast`): one JSON body, or an SSE
stream carrying what the session's message router routes to the request, as the SDK's own stream would."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import anyio
import mcp_types as types
from mcp.server.streamable_http import EventMessage, StreamableHTTPServerTransport
from sse_starlette.event import ServerSentEvent
from starlette.types import Receive, Send

from server import sdk_compat
from server.framing import dump_json

__all__ = ["RequestStream"]

logger = logging.getLogger(__name__)

_SESSION = b"mcp-session-id"
_SSE_HEADERS = [
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"x-accel-buffering", b"no"),
]


class RequestStream:
    """Stands in a transport's table of request streams for a fast-path call: what the session's message router
    routes to the call is written to the client at once, as the SSE events the SDK's stream would carry.

    A call still running after a while (`server.upstream.http_fast`) gets its SSE stream started with the
    SDK's priming event (`prime`), as the SDK's path starts every stream, so that a client whose connection
    drops can resume it with `Last-Event-ID`; once it has left, the stream stands aside so that a resuming GET
    takes it over."""

    def __init__(
        self, send: Send, receive: Receive, transport: StreamableHTTPServerTransport, session_id: bytes, request_id: str
    ) -> None:
        self._send = send
        self._receive = receive
        self._transport = transport
        self._session_id = session_id
        self._request_id = request_id
        self._lock = anyio.Lock()
        self._answered = False
        self._watch: anyio.CancelScope | None = None
        self._streaming = False  # the answer is being sent as it is made: nothing else goes out on this response
        self._sending = anyio.CancelScope()  # of that sending: cancelled when the client leaves
        self.started = False
        """Whether the response is an SSE stream (begun by a message for the client, or the priming event)."""
        self.done = anyio.Event()
        """Set once the answer went out (or nothing more can: the client left, or the session ended)."""

    async def send(self, event: EventMessage) -> None:
        """From the router, in the session's order (it must never fail: the router serves the whole session)."""
        message = event.message
        last = isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and str(message.id) == self._request_id
        data = ServerSentEvent(data=dump_json(message), event="message", id=event.event_id).encode()
        if self._streaming:
            return  # its answer is going out already (a long one, never held by the lock): the rest comes too late
        async with self._lock:
            if not self.done.is_set():
                try:
                    await self._start()
                    await self._send({"type": "http.response.body", "body": data, "more_body": not last})
                except Exception:  # the client is gone: what it missed stays in the event store
                    last = True
        if last:
            self._finish()

    async def answer(self, data: bytes) -> bool:
        """Answer with one JSON body, unless the response is an SSE stream already (False: the router's turn)."""
        async with self._lock:
            if self.started:
                return False
            self._answered = True
        await json_response(self._send, self._session_id, data)
        return True

    async def answer_streamed(self, pieces: AsyncIterator[bytes]) -> None:
        """Answer with what `pieces` makes, sent as it is made (a pass-through's long output, never held whole): one
        JSON body, or the answer's SSE event when the response is an SSE stream already (that event has no id: it is
        not kept for a resuming client). Nothing routed to the request goes out after it begins. A client that has
        gone gets nothing, and one that leaves while it is sent stops it there (the client is watched meanwhile:
        by `prime`'s watch on an SSE stream, here on a JSON body); `pieces` is for its caller to close (what it
        reads from is then released: the spool's file, or the output followed)."""
        async with self._lock:
            if self.done.is_set():
                return
            sse, self._streaming, self._answered = self.started, True, True
            if not sse:
                headers = [(b"content-type", b"application/json"), (_SESSION, self._session_id)]
                await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        sent = False
        try:
            with self._sending:
                async with anyio.create_task_group() as watching:
                    if not sse:
                        watching.start_soon(self._until_left)
                    else:
                        await self._send(
                            {"type": "http.response.body", "body": b"event: message\ndata: ", "more_body": True}
                        )
                    async for piece in pieces:  # the line's pieces: its one newline is its last byte
                        await self._send({"type": "http.response.body", "body": piece, "more_body": True})
                    await self._send({"type": "http.response.body", "body": b"\n" if sse else b"", "more_body": False})
                    sent = True
                    watching.cancel_scope.cancel()
        except OSError:  # the client is gone
            pass
        finally:
            if sse:
                self._finish()
        if not sent:
            logger.debug(
                "the client of request %s left while its answer was sent; the rest is not read", self._request_id
            )

    async def _until_left(self) -> None:
        """Wait for the client of a JSON body to leave, then stop sending its answer."""
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self._sending.cancel()

    async def prime(self, protocol_version: str) -> None:
        """Start the SSE stream with a priming event (for a call that is taking a while), then watch the client."""
        event = await sdk_compat.mint_priming_event(self._transport, self._request_id, protocol_version)
        if event is None:
            return  # a client before 2025-11-25: the SDK sends it none, and it could not resume anyway
        async with self._lock:
            if self.started or self._answered or self.done.is_set():
                return
            await self._start()
            await self._send(
                {"type": "http.response.body", "body": ServerSentEvent(**event).encode(), "more_body": True}
            )
            self._watch = anyio.CancelScope()
        with self._watch:
            while (await self._receive())["type"] != "http.disconnect":
                pass
            self._finish()  # the client left: a GET with Last-Event-ID takes the stream over

    async def _start(self) -> None:
        if not self.started:
            self.started = True
            headers = [*_SSE_HEADERS, (_SESSION, self._session_id)]
            await self._send({"type": "http.response.start", "status": 200, "headers": headers})

    def _finish(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._sending.cancel()
        self.stand_aside()
        self.done.set()

    def stand_aside(self) -> None:
        """Leave the transport's table (if still in it): what is routed to the request goes to the event store."""
        sdk_compat.release_request_stream(self._transport, self._request_id, self)

    async def aclose(self) -> None:
        """The transport ends the request's stream (the session is over)."""
        self._finish()


async def json_response(send: Send, session_id: bytes, data: bytes) -> None:
    headers = [
        (b"content-length", str(len(data)).encode()),
        (b"content-type", b"application/json"),
        (_SESSION, session_id),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})
