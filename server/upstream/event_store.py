"""A bounded in-memory event store, so a client whose HTTP stream drops can resume it (SEP-1699).

Without one, claimcheck's streams carry no event ids and a call whose SSE stream breaks loses its
answer, which the same server reached directly would not. Events are kept per stream in the order
they were sent; the oldest go first once `max_bytes` or `max_events` is passed.

One store serves every MCP session, and stream ids (request ids, the GET stream's key) repeat from one
session to the next: each event keeps the session it was stored for, and a replay sends only events of
the session that asks (`SessionScopedEvents` tells both from the HTTP requests), so no session can
resume another's stream, by a colliding request id or a guessed event id.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.framing import dump_json

__all__ = ["BoundedEventStore", "SessionScopedEvents"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_EVENTS = 10_000
_PRIMING_BYTES = 64


_SESSION_HEADER = b"mcp-session-id"


class _Origin:
    """The MCP session of one HTTP request (of the `initialize` that opened it: known once it is answered)."""

    __slots__ = ("session",)

    def __init__(self, session: str | None) -> None:
        self.session = session


# A ContextVar, not a parameter: the SDK's session manager calls `store_event`/`replay_events_after` with no request.
_ORIGIN: ContextVar[_Origin | None] = ContextVar("claimcheck_event_origin", default=None)
"""Set per HTTP request; the session's message router inherits the one of the request that opened it (mcp 2.3's
`StreamableHTTPSessionManager` hands every session's transport one store and no way to tell it whose event it is)."""


class SessionScopedEvents:
    """An ASGI wrapper of the streamable HTTP endpoint that tells the event store which session is at work."""

    def __init__(self, inner: ASGIApp) -> None:
        self._inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._inner(scope, receive, send)
            return
        origin = _Origin(_header(scope.get("headers", []), _SESSION_HEADER))

        async def noting_send(message: Message) -> None:
            if origin.session is None and message["type"] == "http.response.start":
                origin.session = _header(message.get("headers", []), _SESSION_HEADER)
            await send(message)

        token = _ORIGIN.set(origin)
        try:
            await self._inner(scope, receive, noting_send)
        finally:
            _ORIGIN.reset(token)


def _header(headers: object, name: bytes) -> str | None:
    for key, value in headers:  # type: ignore[attr-defined]  # ASGI headers: an iterable of byte pairs
        if bytes(key).lower() == name:
            return bytes(value).decode("latin-1")
    return None


@dataclass(frozen=True, slots=True)
class _Event:
    stream_id: StreamId
    message: JSONRPCMessage | None
    size: int
    origin: _Origin | None = None


class BoundedEventStore(EventStore):
    """Every event of the last `max_bytes` (JSON size) and at most `max_events` events."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, max_events: int = DEFAULT_MAX_EVENTS) -> None:
        self.max_bytes = max_bytes
        self.max_events = max_events
        self.bytes = 0
        self._events: OrderedDict[EventId, _Event] = OrderedDict()
        self._counter = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._counter))
        size = _PRIMING_BYTES if message is None else len(dump_json(message))
        self._events[event_id] = _Event(stream_id, message, size, _ORIGIN.get())
        self.bytes += size
        while len(self._events) > 1 and (self.bytes > self.max_bytes or len(self._events) > self.max_events):
            _, oldest = self._events.popitem(last=False)
            self.bytes -= oldest.size
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send the stream's events after `last_event_id`; None when that event is unknown, evicted, or another
        session's than the asking one."""
        last = self._events.get(last_event_id)
        asking = _ORIGIN.get()
        if last is None or not _same_session(last, asking):
            return None
        after = False
        for event_id, event in list(self._events.items()):
            if event_id == last_event_id:
                after = True
            elif after and event.stream_id == last.stream_id and event.message is not None:
                if _same_session(event, asking):
                    await send_callback(EventMessage(event.message, event_id))
        return last.stream_id


def _same_session(event: _Event, asking: _Origin | None) -> bool:
    """Whether `event` is of the asking request's session (outside HTTP, with no sessions told, every event is)."""
    if asking is None:
        return event.origin is None
    return event.origin is not None and event.origin.session is not None and event.origin.session == asking.session
