"""The life of every call, fanned out: to the history writer and to each `/v1/events` subscriber."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from server.handles.calls import Call
from server.status.cluster_feed import ClusterFeed
from server.status.history import History
from server.status.tasks import EVENT_OF, task_json

__all__ = ["EventHub"]

logger = logging.getLogger(__name__)

_SUBSCRIBER_BUFFER = 1000
Event = tuple[str, dict[str, Any]]


class EventHub:
    """Observer of every call (`Sessions.observer`); cheap when nobody listens.

    With replicas (`feed`), each event is also published for the other replicas, and theirs come back through
    `deliver`; every task then carries the `replica` that runs it.
    """

    def __init__(self, history: History, feed: ClusterFeed | None = None) -> None:
        self.history = history
        self.feed = feed
        self._subscribers: set[MemoryObjectSendStream[Event]] = set()
        if feed is not None:
            feed.deliver = self.deliver
            feed.watched = lambda: bool(self._subscribers)

    def observe(self, call: Call, kind: str) -> None:
        self.history.record(call, kind)
        feed = self.feed if self.feed is not None and self.feed.others_watch else None
        if not self._subscribers and feed is None:
            return  # nobody watches, here or on another replica
        if kind == "created":
            name = "task.created"
        elif kind == "finished":
            name = EVENT_OF.get(call.status, "task.updated")
        else:
            name = "task.updated"
        task = task_json(call, store_arguments=self.history.settings.store_arguments)
        if self.feed is not None:
            task["replica"] = self.feed.replica
        if feed is not None:
            feed.publish(name, task)
        self.deliver(name, task)

    def deliver(self, name: str, task: dict[str, Any]) -> None:
        """Send an event to this replica's subscribers."""
        event = (name, task)
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
        if self.feed is not None:
            self.feed.viewer_joined()
        try:
            with receive:
                yield receive
        finally:
            self._subscribers.discard(send)
            send.close()
