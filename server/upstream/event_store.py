"""A bounded in-memory event store, so a client whose HTTP stream drops can resume it (SEP-1699).

Without one, claimcheck's streams carry no event ids and a call whose SSE stream breaks loses its
answer, which the same server reached directly would not. Events are kept per stream in the order
they were sent; the oldest go first once `max_bytes` or `max_events` is passed.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

__all__ = ["BoundedEventStore"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_EVENTS = 10_000
_PRIMING_BYTES = 64


@dataclass(frozen=True, slots=True)
class _Event:
    stream_id: StreamId
    message: JSONRPCMessage | None
    size: int


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
        size = _PRIMING_BYTES if message is None else len(message.model_dump_json(by_alias=True, exclude_unset=True))
        self._events[event_id] = _Event(stream_id, message, size)
        self.bytes += size
        while len(self._events) > 1 and (self.bytes > self.max_bytes or len(self._events) > self.max_events):
            _, oldest = self._events.popitem(last=False)
            self.bytes -= oldest.size
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send the stream's events after `last_event_id`; None when that event is unknown or evicted."""
        last = self._events.get(last_event_id)
        if last is None:
            return None
        after = False
        for event_id, event in list(self._events.items()):
            if event_id == last_event_id:
                after = True
            elif after and event.stream_id == last.stream_id and event.message is not None:
                await send_callback(EventMessage(event.message, event_id))
        return last.stream_id
