"""What `StandingStreams` holds to be a session's open GET stream (server.upstream.standing), with the
endpoint behind it faked: which GET the transport answered with 200 is all that counts."""

from __future__ import annotations

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from server.upstream.standing import StandingStreams

pytestmark = pytest.mark.anyio

SESSION = "0123abcd"


def get(kind: str) -> Scope:
    headers = [(b"mcp-session-id", SESSION.encode()), (b"x-kind", kind.encode())]
    return {"type": "http", "method": "GET", "path": "/mcp", "headers": headers}


async def test_a_refused_get_with_a_sessions_id_leaves_that_sessions_open_stream_open() -> None:
    release = anyio.Event()

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        refused = (b"x-kind", b"refused") in scope["headers"]
        await send({"type": "http.response.start", "status": 404 if refused else 200, "headers": []})
        if not refused:
            await release.wait()
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> Message:
        await anyio.sleep_forever()
        raise AssertionError

    async def send(message: Message) -> None:
        pass

    streams = StandingStreams()
    app = streams.app(endpoint)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def held_open() -> None:
                await app(get("open"), receive, send)

            tg.start_soon(held_open)
            await anyio.wait_all_tasks_blocked()
            assert streams.open == {SESSION}
            await app(get("refused"), receive, send)  # another principal's, or a second GET of the session
            still = set(streams.open)
            release.set()
    assert still == {SESSION}
    assert streams.open == set()
