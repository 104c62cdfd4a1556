"""The HTTP fast path for a plain `tools/call` of the sessionless era (2026-07-28): no SDK entry or dispatch for it.

A 2026-07-28 request is one self-contained POST: no session, its context in `params._meta`. The SDK's session
manager hands every POST whose `MCP-Protocol-Version` is not of the handshake era to its single-exchange entry,
which checks Host and Origin, Accept, the routing headers against the body (`MCP-Protocol-Version`,
`Mcp-Method`, `Mcp-Name`, each once), the envelope, and the `Mcp-Param-*` headers against the tool's schema,
then serves the request with a born-ready connection made of its envelope. `SessionlessHttp.post` takes a POST
only when that entry would serve it as an ordinary request, and answers as it would:

- the version header is the sessionless era's and the envelope's own (`read_envelope`: the SDK client's
  envelope and nothing more, no log level or progress token); `Mcp-Method` is `tools/call` and `Mcp-Name`
  the tool's name; no `Mcp-Param-*` header, and a tool whose schema declares none (else the SDK checks them);
  no `Mcp-Session-Id` or `Last-Event-ID` (which that entry ignores: left to it); Host and Origin pass the
  SDK's own check (`TransportSecurityMiddleware`), Accept names JSON and SSE;
- the tool is one `plain_route` takes, whose time rule ends well within the time that entry answers a silent
  handler in one JSON body (`sdk_compat.modern_json_window`); past it, the SDK's entry commits to an SSE
  stream of keep-alive pings, which only its path writes;
- the claimcheck `Session` is the one the SDK's path would pick (`Sessions.find`, not made here): keyed by the
  owner, which the credential says (`PrincipalAsUser` put it in the scope), never a session id; without an
  `Authorization` header, by the client's name and the `Claimcheck-Session` header (`owners.client_owner`), as
  `owners.owner_key` says; `USER` in the shared claimcheck.

The call goes through the same `begin`/`answer` as every proxied call (the fast paths' request machine,
`server.upstream.engine`), the status footer included, and the answer is the SDK's wire form for the request's version
(`sessionless.SessionlessWire`): one `application/json` body, byte for byte the SDK path's. The request's relay is the
SDK's (no requests to the client, no log messages it did not ask for). A client that closes its connection cancels the
call, as on the SDK's path (the 2026-07-28 wire cancels by closing the response stream); it is never answered. The
connection is watched once the call has run `_WATCH_AFTER_SECS` (a watcher costs a quick call more than its answer): a
call that ends sooner is answered even if its client has just left. Everything else goes to the SDK, which answers or
refuses it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass

import anyio
import mcp_types as types
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import decode_header_value, find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from server import sdk_compat
from server.downstream.pool import Route
from server.handles.owners import OWNER, SESSION_HEADER, USER, Entrance, client_owner
from server.proxy import Proxy
from server.upstream.engine import Answer, FastRequest, plain_route
from server.upstream.gate import read_body, replay
from server.upstream.plain_call import CallContext, Envelope, Envelopes
from server.upstream.sessionless import SessionlessClients, SessionlessWire

__all__ = ["SessionlessHttp", "sessionless_version"]

logger = logging.getLogger(__name__)

_VERSION = b"mcp-protocol-version"
_METHOD = b"mcp-method"
_NAME = b"mcp-name"
_ROUTING = (_VERSION, _METHOD, _NAME)
_ASIDE = (b"mcp-session-id", b"last-event-id")
_PARAM = b"mcp-param-"
_AUTHORIZATION = b"authorization"
_CLAIMCHECK_SESSION = SESSION_HEADER.encode()
_MODERN = frozenset(version.encode() for version in MODERN_PROTOCOL_VERSIONS)
_MARGIN_SECS = 5.0
"""How far within the SDK's JSON window a call's time rule must end for the fast path to take it."""
_JSON_HEADERS = b"application/json"
_WATCH_AFTER_SECS = 0.1
"""A call still running after this long has its connection watched, so that a client that leaves cancels it (a
watcher for every call would cost more than a quick call's answer)."""


def sessionless_version(scope: Scope) -> bool:
    """Whether a request says it is of the sessionless era (its first `MCP-Protocol-Version` header)."""
    for name, value in scope["headers"]:
        if name == _VERSION:
            return bytes(value) in _MODERN
    return False


@dataclass(frozen=True, slots=True)
class _Headers:
    """What the fast path reads of a sessionless POST's headers."""

    version: str
    method: str
    name: str
    authorized: bool
    claimcheck_session: str


def _headers(scope: Scope) -> _Headers | None:
    """The routing headers of a POST the SDK's entry would serve as an ordinary call, each exactly once; None for
    anything else (a duplicate, a missing one, `Mcp-Param-*`, a session id or event id)."""
    routing: dict[bytes, bytes] = {}
    authorized, claimcheck_session = False, None
    for name, value in scope["headers"]:
        if name in _ROUTING:
            if name in routing:
                return None
            routing[name] = value
        elif name in _ASIDE or name.startswith(_PARAM):
            return None
        elif name == _AUTHORIZATION:
            authorized = authorized or bool(value)
        elif name == _CLAIMCHECK_SESSION and claimcheck_session is None:
            claimcheck_session = value.decode("latin-1")  # the first, as starlette's `headers.get` reads it
    if len(routing) != len(_ROUTING):
        return None
    version, method, name = (routing[key].decode("latin-1") for key in _ROUTING)
    return _Headers(version, method, name, authorized, claimcheck_session or "")


class SessionlessHttp:
    """Takes plain tool calls of 2026-07-28 clients off the SDK's hands (see the module's doc)."""

    def __init__(self, proxy: Proxy, manager: StreamableHTTPSessionManager) -> None:
        self._proxy = proxy
        self._json_response = manager.json_response
        self._security = TransportSecurityMiddleware(manager.security_settings)
        self._wire = SessionlessWire(manager.app, "body")
        self._longest_wait = sdk_compat.modern_json_window() - _MARGIN_SECS
        self._declared: dict[str, tuple[types.Tool, bool]] = {}
        self._envelopes = Envelopes()
        self._clients = SessionlessClients()

    async def post(self, inner: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a sessionless POST here, or leave it (its body replayed) to `inner`, the SDK's endpoint."""
        headers = _headers(scope)
        if headers is None or headers.method != "tools/call" or self._json_response:
            await inner(scope, receive, send)
            return
        request = Request(scope)
        if await self._security.validate_request(request, is_post=True) is not None or not _accepts(request):
            await inner(scope, receive, send)  # the SDK says what is wrong
            return
        body, messages = await read_body(receive)
        replayed = replay(messages, receive)
        if body is None:
            await inner(scope, replayed, send)
            return
        try:
            envelope = self._envelopes.envelope_of(body)
        except Exception:  # boundary: a bug in reading a request must not cost the client its answer
            logger.exception("the HTTP fast path failed to read a request; the SDK's path takes it")
            envelope = None
        if envelope is None or not await self._call(envelope, headers, scope, receive, send):
            await inner(scope, replayed, send)

    async def _call(self, envelope: Envelope, headers: _Headers, scope: Scope, receive: Receive, send: Send) -> bool:
        """Answer the call here; False (having done nothing) when it is the SDK's to answer after all."""
        proxy, sessionless = self._proxy, envelope.sessionless
        if sessionless is None or sessionless.protocol_version != headers.version:
            return False
        if decode_header_value(headers.name) != envelope.name:
            return False
        route = plain_route(proxy, envelope)
        if route is None or route.policy.async_timeout_secs > self._longest_wait:
            return False
        if envelope.arguments and self._declares_param_headers(route):
            return False
        client = self._clients.client_of(sessionless, envelope.id)
        if client is None:
            return False
        owner: str | None
        if proxy.sessions.shared:
            owner = USER
        elif headers.authorized:
            owner = scope.get(OWNER)  # the credential's principal (`PrincipalAsUser`)
        else:
            params = client.client_params
            owner = client_owner(params.client_info.name if params is not None else "", headers.claimcheck_session)
        entrance = Entrance(None, owner, client)
        session = proxy.sessions.find(entrance) if owner is not None else None
        if session is None:
            return False  # a session still to be made: the SDK's path makes it
        logger.debug("the HTTP fast path takes call %r of a sessionless client", envelope.id)
        context = CallContext(client, sessionless.protocol_version, envelope.id, self._wire)
        answered = Answer()
        request = FastRequest(proxy, answered, envelope, route, context, session, entrance.origin)
        watch = anyio.CancelScope()
        watching = functools.partial(_cancel_on_disconnect, receive, request, watch)
        timer = asyncio.get_running_loop().call_later(_WATCH_AFTER_SECS, proxy.sessions.spawn, watching)
        try:
            request.start()
            data = await answered.of(request)
        finally:
            timer.cancel()
            watch.cancel()
        if data is None:
            return True  # the client left: its call was cancelled, as on the SDK's path, and is never answered
        assert isinstance(data, bytes), "a sessionless call is never a pass-through: it has nothing to stream"
        headers_out = [(b"content-length", str(len(data)).encode()), (b"content-type", _JSON_HEADERS)]
        await send({"type": "http.response.start", "status": 200, "headers": headers_out})
        await send({"type": "http.response.body", "body": data})
        return True

    def _declares_param_headers(self, route: Route) -> bool:
        """Whether the tool's listed schema declares `Mcp-Param-*` headers (valid `x-mcp-header` annotations),
        which the SDK's entry checks against the arguments; remembered per listed definition."""
        definition = route.definition
        known = self._declared.get(route.public)
        if known is None or known[0] is not definition:
            schema = definition.input_schema
            declared = find_invalid_x_mcp_header(schema) is None and bool(x_mcp_header_map(schema))
            known = self._declared[route.public] = (definition, declared)
        return known[1]


async def _cancel_on_disconnect(receive: Receive, request: FastRequest, watch: anyio.CancelScope) -> None:
    """Cancel the call when its client leaves (in the lifespan task group, until `watch` is cancelled)."""
    with watch:
        while (await receive())["type"] != "http.disconnect":
            pass
        request.cancel()


def _accepts(request: Request) -> bool:
    has_json, has_sse = check_accept_headers(request)
    return has_json and has_sse  # what the SDK's entry asks of a POST when it may answer with an SSE stream
