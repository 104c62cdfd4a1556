"""A principal's share of the MCP sessions open over HTTP (`settings.limits.mcpSessions`): streamable HTTP's, and
legacy SSE's (`SseShares`).

The SDK's session manager holds at most 10 000 sessions in all and refuses one more to everybody (503) until one
ends, which an idle one does after 30 minutes. Opening one is a cheap POST, so without a share one token could
take them all and lock every other principal out. `SessionShares.app` stands in front of the endpoint: a POST
that would open a session (no `mcp-session-id`) from a principal (`owners.principal_of`: a token's, or every
client without one together) that holds its share already first ends that principal's least recently used
session with no request in flight and no GET stream open (the SDK's own idle countdown says which:
`idle_scope`); when every one of them is in use, the POST is refused with 503 and one line naming the setting. A
client whose session was ended gets 404 on its next request to it, on which the protocol has it open a new one. A
request of the sessionless era (2026-07-28) opens no session and is never held back here. Clients without a
token are one principal (`owners.ANONYMOUS`): however many connections they open, they hold one share, and a
token's principal keeps its own.

Over legacy SSE a session is its `GET /sse` stream, open as long as the session lives, and nothing in the SDK
bounds how many there are: each holds a socket and a task, so one token could take the process's file
descriptors. `SseShares.hold` counts a principal's open streams; one past its share is refused with 503 and one
line naming the setting (the stream is the session, so none is idle and none is ended for it).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server import sdk_compat
from server.handles.owners import OWNER, principal_of
from server.http_edge import reply
from server.upstream.http_sessionless import sessionless_version

__all__ = ["SessionShares", "SseShares"]

logger = logging.getLogger(__name__)

_SESSION_ID = MCP_SESSION_ID_HEADER.encode()


class SessionShares:
    """Each principal's open MCP sessions, at most `limit` (see the module's doc)."""

    def __init__(self, manager: StreamableHTTPSessionManager, limit: Callable[[], int]) -> None:
        self._manager = manager
        self._limit = limit  # read at each opening: a reloaded config's takes effect at once
        self._open: dict[str, dict[str, None]] = {}  # principal → the ids of its sessions, oldest opened first
        self._opening: dict[str, int] = {}  # principal → its opening requests not answered yet

    def app(self, inner: ASGIApp) -> ASGIApp:
        """`inner` (the streamable HTTP endpoint), opening a session only within its principal's share."""

        async def shared(scope: Scope, receive: Receive, send: Send) -> None:
            principal = _opener(scope)
            if principal is None:
                await inner(scope, receive, send)
                return
            if not await self._room(principal):
                held = len(self._open.get(principal, ()))
                message = (
                    f"This principal has {held} MCP sessions open, each with a request or a GET stream open, at most "
                    f'{self._limit()} ("limits.mcpSessions"); close one (DELETE /mcp with its mcp-session-id), or open '
                    "this one once a request of one has ended."
                )
                await reply(send, 503, {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": message}})
                return
            opened: list[str] = []

            async def noting(message: Message) -> None:
                if message["type"] == "http.response.start" and message["status"] < 400:
                    opened.extend(
                        bytes(value).decode("latin-1")
                        for name, value in message.get("headers", [])
                        if bytes(name).lower() == _SESSION_ID
                    )
                await send(message)

            self._opening[principal] = self._opening.get(principal, 0) + 1
            try:
                await inner(scope, receive, noting)
            finally:
                self._opening[principal] -= 1
                if not self._opening[principal]:
                    del self._opening[principal]
                for session_id in opened:
                    self._open.setdefault(principal, {})[session_id] = None

        return shared

    async def _room(self, principal: str) -> bool:
        """Whether `principal` may open one more session, after ending its least recently used idle one if it
        must (False: every one of its sessions is in use)."""
        mine = self._live(principal)
        excess = len(mine) + self._opening.get(principal, 0) + 1 - self._limit()
        if excess <= 0:
            return True
        used = [(_last_used(transport), session_id, transport) for session_id, transport in mine.items()]
        idle = sorted((last, session_id, transport) for last, session_id, transport in used if last is not None)
        if len(idle) < excess:
            return False
        for _, session_id, transport in idle[:excess]:
            logger.info("ending MCP session %s: its principal opens one past limits.mcpSessions", session_id)
            self._open[principal].pop(session_id, None)
            await transport.terminate()  # the manager forgets it as its session task ends; its id answers 404
        return True

    def _live(self, principal: str) -> dict[str, StreamableHTTPServerTransport]:
        """`principal`'s sessions the manager still holds (those it ended are forgotten here too)."""
        ids = self._open.get(principal)
        if not ids:
            return {}
        live: dict[str, StreamableHTTPServerTransport] = {}
        for session_id in list(ids):
            transport = sdk_compat.transport_of(self._manager, session_id)
            if transport is None or transport.is_terminated:
                del ids[session_id]
            else:
                live[session_id] = transport
        if not ids:
            del self._open[principal]
        return live


class SseShares:
    """Each principal's open legacy SSE sessions (`GET /sse` streams), at most `limit` (see the module's doc)."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit  # read at each opening: a reloaded config's takes effect at once
        self._open: dict[str, int] = {}  # principal → its streams open now

    @contextmanager
    def hold(self, scope: Scope) -> Iterator[str | None]:
        """Count the stream `scope` opens for as long as the block runs; gives None where it may open, else the
        one line that refuses it (requests without a token count as one principal, `owners.ANONYMOUS`)."""
        principal = principal_of(scope.get(OWNER))
        held, limit = self._open.get(principal, 0), self._limit()
        if held >= limit:
            yield (
                f'This principal has {held} SSE sessions open, at most {limit} ("limits.mcpSessions"); end one of '
                "its GET /sse streams first."
            )
            return
        self._open[principal] = held + 1
        try:
            yield None
        finally:
            self._open[principal] -= 1
            if not self._open[principal]:
                del self._open[principal]


def _opener(scope: Scope) -> str | None:
    """The principal of a POST that would open a session (no `mcp-session-id`, not of the sessionless era, which
    opens none); else None."""
    if scope["type"] != "http" or scope["method"] != "POST" or sessionless_version(scope):
        return None
    if any(bytes(name).lower() == _SESSION_ID for name, _ in scope["headers"]):
        return None
    return principal_of(scope.get(OWNER))


def _last_used(transport: StreamableHTTPServerTransport) -> float | None:
    """When the session's last request ended (the start of its idle countdown), or None while one is in flight (a
    GET stream open counts) or where the session keeps no countdown."""
    idle = transport.idle_scope
    if idle is None or math.isinf(idle.deadline) or idle.cancel_called:
        return None
    return idle.deadline
