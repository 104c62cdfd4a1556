"""The standing GET streams of streamable HTTP sessions: while one is open, the session's questions go at once.

A handshake-era client over streamable HTTP may hold a GET stream open for the server's own messages. The
SDK's transport sends a request with no related request on that stream when it is open, and otherwise only
stores it for a replay that may never come; it does not say whether the stream is open. The ASGI layer
does: a GET with an `Mcp-Session-Id` that the transport answers with 200 is that stream, open until the
transport's handling of it returns. `StandingStreams.app` watches exactly that, and for as long as it lasts
carries the session's waiting questions (`server.handles.questions`) to the client over it; when it ends,
a question still out goes back to the inbox (for `wait_for_tool_output`, or the next stream).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.downstream.relay import ClientChannel
from server.handles.questions import Inbox

__all__ = ["StandingStreams"]

_SESSION_HEADER = b"mcp-session-id"


@dataclass(eq=False)
class _Binding:
    inbox: Inbox | None = None
    channel: ClientChannel | None = None
    bound: anyio.Event = field(default_factory=anyio.Event)


class StandingStreams:
    """Which MCP sessions have their GET stream open, and what their questions are carried with."""

    def __init__(self) -> None:
        self._bindings: dict[str, _Binding] = {}
        self.open: set[str] = set()
        """The MCP session ids whose GET stream is open now."""

    def bind(self, mcp_session_id: str, inbox: Inbox, channel: ClientChannel) -> None:
        """The session's inbox, and its channel to the client (from the first request that shows them)."""
        binding = self._bindings.setdefault(mcp_session_id, _Binding())
        binding.inbox, binding.channel = inbox, channel
        binding.bound.set()

    def forget(self, mcp_session_id: str) -> None:
        self._bindings.pop(mcp_session_id, None)

    def app(self, inner: ASGIApp) -> ASGIApp:
        """`inner` (the streamable HTTP endpoint), watching its GET streams."""
        return _Watched(self, inner)

    async def carry(self, session_id: str, opened: anyio.Event) -> None:
        """Once the GET stream is open, carry the session's questions over it (until cancelled, as it closes)."""
        await opened.wait()
        self.open.add(session_id)
        binding = self._bindings.setdefault(session_id, _Binding())
        await binding.bound.wait()
        assert binding.inbox is not None and binding.channel is not None
        await binding.inbox.carry_all(binding.channel.ask, binding.channel.can_ask, standing=True)


class _Watched:
    """An ASGI app (a class, so that Starlette's `Route` takes it as one) that watches GET streams."""

    def __init__(self, streams: StandingStreams, inner: ASGIApp) -> None:
        self._streams = streams
        self._inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = _session_of(scope)
        if session_id is None:
            await self._inner(scope, receive, send)
            return
        opened = anyio.Event()

        async def watching_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 200:
                opened.set()
            await send(message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(self._streams.carry, session_id, opened)
            try:
                await self._inner(scope, receive, watching_send)
            finally:
                if opened.is_set():  # a refused GET (another principal's, a second stream) leaves the open one be
                    self._streams.open.discard(session_id)
                tg.cancel_scope.cancel()  # a question still out goes back to its inbox


def _session_of(scope: Scope) -> str | None:
    """The MCP session of a GET that asks for the standing stream; None for anything else."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return None
    for name, value in scope.get("headers", []):
        if name == _SESSION_HEADER:
            return bytes(value).decode("latin-1")
    return None
