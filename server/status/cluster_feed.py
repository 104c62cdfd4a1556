"""One view of the cluster: every replica's live events and stats, through the Redis the replicas share.

Keys and channels (under `state.keyPrefix`, beside `server.handles.redis_wire`'s):
- channel `events`: `{"replica": id, "events": [[name, task], …]}`, a batch of one replica's call events as
  `/v1/events` sends them; each replica forwards the others' to its own subscribers, the task marked `replica`.
- `stats:<replica>`: that replica's `/v1/stats` (JSON), written every `STATS_SECS`, expiring after three missed
  writes, so a stopped replica leaves the view within seconds.
- `viewers:<replica>`: present while that replica has a `/v1/events` subscriber (written at once when one
  comes, then every `STATS_SECS`, expiring like the stats). A replica publishes its events only while another
  replica has one (it reads these keys every `STATS_SECS`), so a cluster nobody watches sends no events at all;
  a dashboard opened on one replica hears the others' calls within `STATS_SECS`, and sees their running ones
  at once in its snapshot.

Pub/sub is at-most-once: a subscriber that misses an event sees the call again in its next snapshot (the
running ones through `ClusterView`, finished ones in their own replica's history). Events queue in a bounded
buffer; past it they are dropped, never waited for, so a slow Redis never slows a call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from server.handles.redis_wire import subscribe_forever

__all__ = ["STATS_SECS", "ClusterFeed"]

logger = logging.getLogger(__name__)

STATS_SECS = 2.0
_BUFFER = 10_000
_BATCH = 500
_MESSAGE_BYTES = 4 * 1024 * 1024  # a batch from another replica past this is dropped unread

Event = tuple[str, dict[str, Any]]


class ClusterFeed:
    """Publishes this replica's events and stats; hands the others' events to `deliver`."""

    def __init__(
        self,
        shared: tuple[Any, str, tuple[type[BaseException], ...]],
        replica: str,
        stats: Callable[[], Any],
    ) -> None:
        self._redis, self._prefix, self._errors = shared
        self.replica = replica
        self._stats = stats  # an async callable: this replica's /v1/stats
        self._send: MemoryObjectSendStream[Event]
        self._receive: MemoryObjectReceiveStream[Event]
        self._send, self._receive = anyio.create_memory_object_stream[Event](_BUFFER)
        self.deliver: Callable[[str, dict[str, Any]], None] = lambda name, data: None
        self.watched: Callable[[], bool] = lambda: False
        """Whether this replica has a `/v1/events` subscriber now (set by its `EventHub`)."""
        self.others_watch = False
        """Whether another replica had one at the last look: only then are this replica's events published."""
        self._viewer_came = anyio.Event()

    def viewer_joined(self) -> None:
        """A `/v1/events` subscriber came here: say so to the other replicas now, not at the next tick."""
        self._viewer_came.set()

    def publish(self, name: str, data: dict[str, Any]) -> None:
        """Queue one of this replica's events for the others (dropped when the buffer is full, or when no other
        replica has a subscriber: `others_watch`)."""
        if not self.others_watch:
            return
        try:
            self._send.send_nowait((name, data))
        except anyio.WouldBlock:
            pass

    async def stats(self) -> dict[str, Any]:
        """Every live replica's last stats, by replica."""
        try:
            keys = [key async for key in self._redis.scan_iter(match=self._prefix + "stats:*", count=100)]
            values = await self._redis.mget(keys) if keys else []
        except self._errors as exc:
            raise ConnectionError(f"the shared state did not answer: {exc}") from None
        found: dict[str, Any] = {}
        for key, value in zip(keys, values, strict=True):
            if value is not None:
                try:
                    found[key.removeprefix(self._prefix + "stats:")] = json.loads(value)
                except ValueError:
                    continue
        return found

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._publish_events)
            tg.start_soon(self._publish_stats)
            tg.start_soon(self._listen)
            task_status.started()

    async def _publish_events(self) -> None:
        channel = self._prefix + "events"
        async for first in self._receive:
            batch = [first]
            while len(batch) < _BATCH:
                try:
                    batch.append(self._receive.receive_nowait())
                except anyio.WouldBlock:
                    break
            message = json.dumps({"replica": self.replica, "events": batch}, ensure_ascii=False)
            try:
                await self._redis.publish(channel, message)
            except self._errors as exc:
                logger.debug("could not publish %d events to the other replicas: %s", len(batch), exc)

    async def _publish_stats(self) -> None:
        key, expiry = self._prefix + "stats:" + self.replica, int(STATS_SECS * 3000)
        while True:
            try:
                await self._share_viewers(expiry)
                stats = await self._stats()
                await self._redis.set(key, json.dumps(stats), px=expiry)
            except self._errors as exc:
                logger.debug("could not share this replica's stats: %s", exc)
            with anyio.move_on_after(STATS_SECS):
                await self._viewer_came.wait()
            self._viewer_came = anyio.Event()

    async def _share_viewers(self, expiry: int) -> None:
        """Mark this replica as watched (or let the mark expire), and look whether another replica is."""
        if self.watched():
            await self._redis.set(self._prefix + "viewers:" + self.replica, "1", px=expiry)
        own = self._prefix + "viewers:" + self.replica
        self.others_watch = any(
            [key async for key in self._redis.scan_iter(match=self._prefix + "viewers:*", count=100) if key != own]
        )

    async def _listen(self) -> None:
        channel = self._prefix + "events"
        await subscribe_forever(
            self._redis, [channel], lambda _, data: self._received(data), self._errors, delays=(1.0, 1.0)
        )

    def _received(self, data: Any) -> None:
        if not isinstance(data, str) or len(data) > _MESSAGE_BYTES:
            return
        try:
            message = json.loads(data)
            replica, events = message["replica"], message["events"]
        except (ValueError, KeyError, TypeError):
            return
        if replica == self.replica or not isinstance(replica, str) or not isinstance(events, list):
            return
        for event in events:
            if isinstance(event, list) and len(event) == 2 and isinstance(event[1], dict):
                name, task = event
                self.deliver(str(name), {**task, "replica": replica})
