"""The fast path for a plain `tools/call` over streamable HTTP: no SDK transport or dispatch for it.

`HttpFastPath.app` wraps the `/mcp` endpoint, inside every edge rule (the bearer token, one Authorization and
Origin header, the body limit, the request deadline: `server.http_edge`). It takes a POST only when the SDK
would serve it as an ordinary request of a live, initialized handshake-era session, and answers it as that
session would:

- the `mcp-session-id` is a session of the SDK's manager, not ended, owned by the request's credential, with
  an `mcp-protocol-version` header of the handshake era that is the session's own; Host, Origin (the SDK's
  DNS-rebinding check), Accept (JSON and SSE) and Content-Type pass the SDK's own checks; no Last-Event-ID;
- the body is a plain call (`read_envelope`, the stdio fast path's reader: no `_meta`, so no progress token or
  task) to a tool `fast_route` takes, from a session whose claimcheck `Session` is already the one the SDK's
  path would pick (`Sessions.find`, with the owner key from the Authorization header); an answer that carries
  the status footer is built with it (`replies.response_line`); to a server whose rules are off, it is made as a
  pass-through is (below), its answer with the footer;
- or a pass-through from a claimcheck in front (its `_meta` holds the chain's mark and, at most, a progress
  token) to a tool `passthrough_route` takes: answered as over stdio (`server.upstream.fast_passthrough`), its
  progress sent under the request's token; a long output is sent as it is read, from the spool's file or while
  it grows (`RequestStream.answer_streamed`), never held whole (the SDK's path sends it from the file once it is
  all stored: `server.upstream.http_stand_ins`).

A POST of the sessionless era (2026-07-28) has no session: `server.upstream.http_sessionless` takes its plain
calls.

The call goes through the same `begin`/`answer` as every proxied call (`server.upstream.engine.FastRequest`),
so the time rule, handles, the size rule, history and the status API see it. The answer is one
`application/json` body, which a client accepting JSON and SSE takes as it takes an SSE stream (and by which a
test tells that the fast path took a call); a call still running after `_PRIME_AFTER_SECS` is answered on an
SSE stream begun with the SDK's priming event instead, so that a client whose connection drops can resume it
with `Last-Event-ID`. What the call sends the client on its way (the downstream's logs, its questions:
sampling, elicitation, roots) is routed by the session's own message router, as for any request of the
session, to a stand-in for the request's stream (`server.upstream.http_stream`): the first such message
turns the response into an SSE stream carrying it at once, with the event ids of the event store, and the
answer then follows through the router, in order.

A `notifications/cancelled` for a call taken here cancels it; as the SDK's 2025-era HTTP transport does, the
cancelled request is then answered with a "Request cancelled" error (-32800). A client that disconnects
mid-call leaves the call running to its end (the time rule still applies), as on the SDK's path; one that leaves
while a pass-through's long output is sent stops the sending there (`RequestStream.answer_streamed`). Everything
else goes to the SDK: initialize, GET streams, DELETE, notifications, responses, batches, calls with `_meta`,
claimcheck's own tools, and all requests while the fast path is off
(`settings.fastPath`, `CLAIMCHECK_FAST_PATH=off`). The SDK has no public way in for any of this: the
session manager's table of transports, a transport's table of request streams and its idle count, and the
dispatcher's request context are reached through `server.sdk_compat`, which names each and what would replace it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.streamable_http import (
    REQUEST_CANCELLED,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from server import sdk_compat
from server.budget import request_key
from server.handles.owners import OWNER, USER, Entrance
from server.proxy import Proxy
from server.upstream.engine import Answer, FastRequest, fast_route
from server.upstream.fast_passthrough import Streamed
from server.upstream.gate import read_body, replay
from server.upstream.http_sessionless import SessionlessHttp, sessionless_version
from server.upstream.http_stream import RequestStream
from server.upstream.plain_call import CallContext, Envelope, Envelopes, cancelled_id
from server.upstream.streamed import followed_pieces, spooled_pieces

__all__ = ["PRIME_ENV", "HttpFastPath"]

logger = logging.getLogger(__name__)

_SESSION = b"mcp-session-id"
_VERSION = b"mcp-protocol-version"
_ACCEPT = b"accept"
_LAST_EVENT = b"last-event-id"
PRIME_ENV = "CLAIMCHECK_FAST_PATH_PRIME_SECS"
_PRIME_AFTER_SECS = 0.5
"""A call still running after this long (or `PRIME_ENV`'s seconds) is answered on an SSE stream begun with a
priming event, so that it can be resumed; a quicker one in one JSON body."""


class _Channel(sdk_compat.DispatchContext[TransportContext]):
    """The request-scoped channel of a fast-path call, as the dispatcher makes one for each request it reads;
    `used` says whether anything went to the client on it (then the answer must follow it through the router)."""

    used: bool = False

    async def notify(self, method: str, params: Any, opts: Any = None) -> None:
        self.used = True
        await super().notify(method, params, opts)

    async def send_raw_request(self, method: str, params: Any, opts: Any = None) -> dict[str, Any]:
        self.used = True
        return await super().send_raw_request(method, params, opts)


class HttpFastPath:
    """Takes plain tool calls of streamable HTTP sessions off the SDK's hands (see the module's doc)."""

    def __init__(self, proxy: Proxy, manager: StreamableHTTPSessionManager) -> None:
        self._proxy = proxy
        self._manager = manager
        self._connections: dict[str, Connection] = {}
        self._running: dict[tuple[bytes, bool, int | str], FastRequest] = {}
        self._prime_after = _prime_after()
        self._envelopes = Envelopes()
        self._sessionless = SessionlessHttp(proxy, manager)

    async def middleware(
        self, ctx: ServerRequestContext[Any], call_next: Callable[[ServerRequestContext[Any]], Awaitable[Any]]
    ) -> Any:
        """A `Server.middleware`: notes the `Connection` of each streamable HTTP session as its requests pass."""
        connection = sdk_compat.connection_of(ctx.session)
        session_id = getattr(connection, "session_id", None)
        if connection is not None and session_id is not None and session_id not in self._connections:
            self._connections[session_id] = connection
            connection.exit_stack.callback(self._connections.pop, session_id, None)
        return await call_next(ctx)

    def app(self, inner: ASGIApp) -> ASGIApp:
        """`inner` (the streamable HTTP endpoint), with plain calls taken off its hands."""

        async def fast(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await inner(scope, receive, send)
            elif sessionless_version(scope):
                await self._sessionless.post(inner, scope, receive, send)
            else:
                await self._post(inner, scope, receive, send)

        return fast

    async def _post(self, inner: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        found = await self._session_of(scope)
        if found is None:
            await inner(scope, receive, send)
            return
        session_id, connection, transport = found
        body, messages = await read_body(receive)
        replayed = replay(messages, receive)
        if body is None:
            await inner(scope, replayed, send)
            return
        try:
            cancelled = cancelled_id(body) if self._running else None
            envelope = self._envelopes.envelope_of(body) if cancelled is None else None
        except Exception:  # boundary: a bug in reading a request must not cost the client its answer
            logger.exception("the HTTP fast path failed to read a request; the SDK's path takes it")
            cancelled = envelope = None
        if cancelled is not None:
            running = self._running.get((session_id, *request_key(cancelled)))
            if running is not None:
                running.cancel()
                headers = [(b"content-length", b"0"), (b"content-type", b"application/json"), (_SESSION, session_id)]
                await send({"type": "http.response.start", "status": 202, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return
        if envelope is None or not await self._call(envelope, scope, receive, send, session_id, connection, transport):
            await inner(scope, replayed, send)

    async def _session_of(self, scope: Scope) -> tuple[bytes, Connection, StreamableHTTPServerTransport] | None:
        """The session a POST is for, if the SDK would serve it as an ordinary request of a live handshake-era
        session (before its body is read: the checks of the manager and the transport, in their order)."""
        session_id = version = None
        for name, value in scope["headers"]:
            if name == _SESSION:
                session_id = value
            elif name == _VERSION:
                version = value
            elif name == _LAST_EVENT:
                return None
        if session_id is None or version is None:
            return None
        key = session_id.decode("latin-1")
        connection = self._connections.get(key)
        manager = self._manager
        transport = sdk_compat.transport_of(manager, key)
        if connection is None or transport is None or transport.is_terminated or manager.json_response:
            return None
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        if requestor != sdk_compat.session_owner(manager, key):
            return None  # the SDK answers as for an unknown session
        if transport.idle_scope is not None and transport.idle_scope.cancel_called:
            return None
        if not connection.initialized.is_set() or version.decode("latin-1") != connection.protocol_version:
            return None
        if connection.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        request = Request(scope)
        if not await sdk_compat.validate_request(transport, request):
            return None  # Host, Origin or Content-Type refused: the SDK says which
        if not _accepts(request) or not sdk_compat.content_type_ok(transport, request):
            return None
        return session_id, connection, transport

    async def _call(
        self,
        envelope: Envelope,
        scope: Scope,
        receive: Receive,
        send: Send,
        session_id: bytes,
        connection: Connection,
        transport: StreamableHTTPServerTransport,
    ) -> bool:
        """Answer the call here; False (having done nothing) when it is the SDK's to answer after all."""
        proxy = self._proxy
        route = fast_route(proxy, envelope) if envelope.sessionless is None else None  # the session's era only
        running_key = (session_id, *request_key(envelope.id))
        request_id = str(envelope.id)
        if route is None or running_key in self._running or sdk_compat.request_stream_taken(transport, request_id):
            return False
        dispatcher = connection.outbound
        if not isinstance(dispatcher, JSONRPCDispatcher):
            return False
        metadata = ServerMessageMetadata(request_context=Request(scope), can_send_request=True)
        channel = sdk_compat.dispatch_context(_Channel, dispatcher, envelope.id, metadata, envelope.progress_token)
        client = ServerSession(channel, connection)
        owner: str | None = scope.get(OWNER)  # the request's principal (`PrincipalAsUser`), if it has a token
        entrance = Entrance(connection, USER if proxy.sessions.shared else owner, client)
        session, origin = proxy.sessions.find(entrance), entrance.origin
        if session is None:
            return False  # a session still to be made or attached: the SDK's path
        stream = RequestStream(send, receive, transport, session_id, request_id)
        sdk_compat.take_request_stream(transport, request_id, stream)
        context = CallContext(client, connection.protocol_version, envelope.id)
        answered = Answer()
        request = FastRequest(proxy, answered, envelope, route, context, session, origin)
        self._running[running_key] = request
        version = connection.protocol_version
        timer = asyncio.get_running_loop().call_later(
            self._prime_after, proxy.sessions.spawn, functools.partial(stream.prime, version)
        )
        try:
            with sdk_compat.in_flight(transport):
                request.start()
                data = await answered.of(request)
                timer.cancel()
                channel.close()
                if data is None:  # cancelled: answered as the SDK's transport answers it
                    error = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
                    data = json.dumps({"jsonrpc": "2.0", "id": envelope.id, "error": error}).encode()
                if not isinstance(data, bytes):  # a pass-through's long output: sent as it is read, never whole
                    pieces = spooled_pieces(*data.parts()) if isinstance(data, Streamed) else followed_pieces(data)
                    async with contextlib.aclosing(pieces):
                        await stream.answer_streamed(pieces)
                elif channel.used or not await stream.answer(data):  # behind what the router carries for it
                    message = types.jsonrpc_message_adapter.validate_json(data, by_name=False)
                    try:
                        await sdk_compat.write_message(dispatcher, message)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return True  # the session ended under the call: its stream is over
                    await stream.done.wait()
        finally:
            timer.cancel()
            self._running.pop(running_key, None)
            stream.stand_aside()
        return True


def _prime_after() -> float:
    try:
        return max(0.0, float(os.environ.get(PRIME_ENV, _PRIME_AFTER_SECS)))
    except ValueError:
        return _PRIME_AFTER_SECS


def _accepts(request: Request) -> bool:
    has_json, has_sse = check_accept_headers(request)
    return has_json and has_sse  # what the SDK's transport asks of a POST when it answers with SSE streams
