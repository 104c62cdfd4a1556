"""The life of every call, fanned out: to the history writer and to each `/v1/events` subscriber."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from server.handles.calls import Call
from server.status.history import History
from server.status.tasks import EVENT_OF, task_json

__all__ = ["EventHub"]

logger = logging.getLogger(__name__)

_SUBSCRIBER_BUFFER = 1000
Event = tuple[str, dict[str, Any]]


class EventHub:
    """Observer of every call (`Sessions.observer`); cheap when nobody listens."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._subscribers: set[MemoryObjectSendStream[Event]] = set()

    def observe(self, call: Call, kind: str) -> None:
        self.history.record(call, kind)
        if not self._subscribers:
            return
        if kind == "created":
            name = "task.created"
        elif kind == "finished":
            name = EVENT_OF.get(call.status, "task.updated")
        else:
            name = "task.updated"
        event = (name, task_json(call, store_arguments=self.history.settings.store_arguments))
        for subscriber in list(self._subscribers):
            try:
                subscriber.send_nowait(event)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                logger.info("dropping a status subscriber that does not keep up")  # it reconnects to a snapshot
                self._subscribers.discard(subscriber)
                subscriber.close()

    @contextmanager
    def subscribe(self) -> Iterator[MemoryObjectReceiveStream[Event]]:
        send, receive = anyio.create_memory_object_stream[Event](_SUBSCRIBER_BUFFER)
        self._subscribers.add(send)
        try:
            with receive:
                yield receive
        finally:
            self._subscribers.discard(send)
            send.close()
