"""The bounded event store behind resumable HTTP streams: replay order, streams kept apart, eviction."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp.server.streamable_http import EventMessage

from server.upstream.event_store import BoundedEventStore

pytestmark = pytest.mark.anyio


def note(n: int, padding: int = 0) -> types.JSONRPCMessage:
    return types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"n": n, "pad": "x" * padding}
    )


async def replay(store: BoundedEventStore, after: str) -> tuple[str | None, list[int]]:
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    stream = await store.replay_events_after(after, send)
    return stream, [event.message.params["n"] for event in sent]  # type: ignore[union-attr,index]  # notifications only


async def test_replay_sends_the_later_events_of_the_same_stream_in_order() -> None:
    store = BoundedEventStore()
    priming = await store.store_event("a", None)
    await store.store_event("a", note(1))
    await store.store_event("b", note(100))
    await store.store_event("a", note(2))
    assert await replay(store, priming) == ("a", [1, 2])
    assert await replay(store, "no-such-event") == (None, [])


async def test_the_oldest_events_go_once_the_byte_budget_is_passed() -> None:
    store = BoundedEventStore(max_bytes=3000)
    first = await store.store_event("a", note(1, padding=1000))
    await store.store_event("a", note(2, padding=1000))
    third = await store.store_event("a", note(3, padding=1000))
    await store.store_event("a", note(4, padding=1000))
    assert 2000 < store.bytes <= 3000  # two events of about 1 070 bytes each
    assert await replay(store, first) == (None, [])  # evicted: the client must start over
    assert await replay(store, third) == ("a", [4])
    store_by_count = BoundedEventStore(max_events=2)
    for n in range(5):
        await store_by_count.store_event("s", note(n))
    assert len(store_by_count._events) == 2
